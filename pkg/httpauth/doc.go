// Package httpauth guards HTTP endpoints, such as an operator's /metrics,
// with the cluster's own authentication and authorization, as
// kube-apiserver's delegated auth and kubebuilder's secure metrics do: a
// client sends a bearer token (a ServiceAccount token, as Prometheus does),
// the API server authenticates it (a TokenReview) and authorizes its user
// for the request's verb and path as a non-resource URL (a
// SubjectAccessReview), so access is granted with RBAC:
//
//	rules:
//	- nonResourceURLs: ["/metrics"]
//	  verbs: ["get"]
//
// The contract:
//   - No token, or a token the API server does not authenticate: 401.
//     An authenticated user not authorized: 403. A review that cannot be
//     created (the API server is down, or the operator lacks create on
//     tokenreviews and subjectaccessreviews): 500, and the error is logged.
//   - Cached: a token's review is remembered by a SHA-256 hash of the token
//     (never the token itself), and an access review by the user, verb and
//     path, for Options.AllowTTL when admitted and Options.DenyTTL when
//     not. Each cache holds at most Options.CacheSize entries. A failed
//     review is not remembered.
//   - Safe for concurrent use. Requests that miss the cache at the same time
//     each create their review.
//
// Goroutines: none; a Guard works on the goroutine of the request.
package httpauth
