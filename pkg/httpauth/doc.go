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
//     A review not answered within Options.ReviewTimeout: 503 with
//     Retry-After, and the error is logged; a request waits no longer than
//     that for each of its two reviews.
//   - Cached: a token's review is remembered by a SHA-256 hash of the token
//     (never the token itself), and an access review by the user, verb and
//     path, for Options.AllowTTL when admitted and Options.DenyTTL when
//     not. Admitted and refused results are kept apart, each kind in
//     caches of at most Options.CacheSize entries: refusals never evict
//     admissions, so a flood of unknown tokens cannot push a scraper's
//     token out. A review that fails or is throttled is not remembered.
//   - Bounded: reviews of what the Guard does not know (a token it has not
//     accepted, an access it has not allowed) take a token from a bucket
//     of Options.ReviewBurst, refilled at Options.ReviewsPerSecond; when
//     it is empty, a request that misses the cache gets 429 with
//     Retry-After and no review is created. This bounds the load a flood
//     of tokens puts on the API server. Cached results, and renewals of
//     known tokens and accesses, are not throttled.
//   - Safe for concurrent use. Requests that miss the cache for one token
//     (or one access) at the same time share one review.
//
// Options.Client should be a clientset of the Guard's own, with a rate
// limiter of its own, so that the reviews spend no other client's
// request budget.
//
// Goroutines: each review runs on a goroutine of its own, started by the
// request that needs it first; the requests waiting for it leave when it
// is answered, when ReviewTimeout passes or when their own context is
// done. The goroutine ends when Client returns, which a clientset does by
// ReviewTimeout, as the review's context is then done. While it has not
// returned, no other review of the same token or access is started.
package httpauth
