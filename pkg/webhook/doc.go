// Package webhook serves the admission and conversion webhooks an operator
// gives the API server: typed validation and defaulting of its objects, and
// conversion between the versions of its custom resources.
//
//   - A Validator[T] checks creates, updates (old and new) and deletes of
//     objects of type T; NewValidating makes it the handler of a
//     ValidatingWebhookConfiguration. A returned error denies the request
//     with its message, which is what the client sees.
//   - A Defaulter[T] fills in an object on create and update;
//     NewDefaulting makes it the handler of a MutatingWebhookConfiguration,
//     answering with a JSON patch (RFC 6902) of exactly what it changed.
//   - A CRD served in several versions converts them hub and spoke: each
//     version but the hub is Convertible to and from the hub, and
//     NewConversion makes them the handler of the CRD's
//     spec.conversion.webhook.
//   - A Server serves the handlers over HTTPS, each at its path, with the
//     certificate a GetCertificate func returns at each handshake.
//
// T is a pointer to a Go type registered in the scheme the constructors
// are given (such as *v1.Widget); they fail, naming the type and the fix,
// when it is not. Handlers decode each request's objects into new values of
// T, so a Validator or Defaulter owns the objects it is given. They are
// called concurrently.
//
// The wire formats are admission.k8s.io/v1 AdmissionReview and
// apiextensions.k8s.io/v1 ConversionReview: set admissionReviewVersions and
// conversionReviewVersions to ["v1"]. A request that is not such a review
// is answered with an HTTP error that says what was wrong; the API server
// then applies the webhook's failurePolicy. A review is always answered
// with a review, whose response echoes the request's UID: a denial carries
// a status (403 Forbidden, unless the error is an apierrors.APIStatus,
// whose code and reason pass through), and a failed conversion carries it
// in the response's result.
//
// The defaulting patch names each changed member of an object down to the
// leaves, on the object as the request carries it: fields the Go type does
// not know, and zero values it writes that the request did not have, are
// left alone. Arrays of the same length are patched element by element; an
// array whose length changed is replaced whole. An object Default did not
// change gets no patch.
//
// # With a manager
//
// manager.Options.Webhook makes the manager build a Server
// (Manager.Webhooks) and run it, with its certificate source, from the
// start of Run on every replica, before the caches sync: the API server
// may need a conversion webhook to answer the very lists the caches wait
// for. /readyz fails until the Server is Ready. A Service in front of the
// webhook routes only to ready pods, and a pod is ready only once its
// caches synced: so that an operator whose caches need its own conversion
// webhook can start when no replica is ready, give the webhook's Service
// publishNotReadyAddresses: true.
//
// HTTP/2 is off unless Options.HTTP2 is set, as a mitigation of the
// HTTP/2 rapid reset attack (CVE-2023-44487); the API server calls
// webhooks over HTTP/1.1 as well.
//
// The Server's metrics are controller-runtime's:
// controller_runtime_webhook_requests_total{webhook,code},
// controller_runtime_webhook_latency_seconds{webhook} and
// controller_runtime_webhook_requests_in_flight{webhook}, webhook being the
// path, and controller_runtime_webhook_panics_total and
// controller_runtime_conversion_webhook_panics_total, the panics its
// admission and conversion handlers recovered from.
//
// Goroutines: Server.Start runs the HTTP server, which serves each
// connection on a goroutine of its own; the handlers run there. Start
// returns once they have ended, after a drain of at most 10 seconds (a
// handler that ignores its request's ctx past that is left running). The
// constructors and handlers start none.
package webhook
