// Package certs provides serving certificates for ctrlkit's TLS servers
// (webhooks, metrics) and keeps them current, without cert-manager.
//
// Every source has the same two methods:
//
//   - GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error), for
//     tls.Config.GetCertificate: safe for concurrent use, never blocks, and
//     returns the certificate current at the time, so a server picks up a
//     new one on its next handshake with no restart;
//   - Start(ctx) error, which keeps the certificate current until ctx is
//     done and then returns nil (a manager runs it as a Runnable).
//
// The sources:
//
//   - SelfSigned: a self-signed certificate made in memory, renewed in
//     memory before it expires. For servers whose clients do not verify the
//     certificate against a CA, such as HTTPS metrics scraped with
//     insecure_skip_verify.
//   - Files: a certificate and key mounted from files (cert-manager writes
//     them into a Secret), reloaded when the files change.
//   - Shared: a CA and a serving certificate that the operator makes itself
//     and keeps in a Secret that all its replicas share, rotated before
//     they expire, with the CA bundle kept current in the webhook
//     configurations and CRDs that name it.
//
// Lifetime says how long a certificate is valid and when it is replaced;
// every source validates its options when it is built and says what to
// change.
package certs
