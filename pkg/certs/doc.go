// Package certs provides serving certificates for ctrlkit's TLS servers
// (webhooks, metrics) and keeps them current, without cert-manager.
//
// Every source has the same two methods:
//
//   - GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error), for
//     tls.Config.GetCertificate: safe for concurrent use, never blocks, and
//     returns the certificate current at the time, so a server picks up a
//     new one on its next handshake with no restart. (Leave
//     tls.Config.Certificates empty: crypto/tls prefers it to
//     GetCertificate when a client sends no server name, as clients
//     calling an IP address do.)
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
//     configurations and CRDs that name it (Targets).
//
// Lifetime says how long a certificate is valid and when it is replaced;
// every source validates its options when it is built and says what to
// change. The keys this package makes are ECDSA P-256.
//
// # The shared Secret
//
// A Shared source keeps everything in one Secret (type kubernetes.io/tls
// when it creates it; a Secret that exists keeps its type):
//
//   - tls.crt, tls.key: the serving certificate and its key;
//   - signer.crt, signer.key: the CA that signed the serving certificate;
//   - ca.crt: the CA bundle, every CA a client should trust, oldest first;
//     this is what is injected as caBundle;
//   - next-signer.crt, next-signer.key: during a CA rotation only, the new
//     CA, already in ca.crt.
//
// Every replica runs the same loop, at once when Start begins, whenever
// the Secret changes (a watch on it by name), when something falls due,
// and at least every CheckInterval. A round reads the targets, then the
// Secret; creates the Secret if there is none; writes it if something is
// due; serves its serving certificate; and injects its ca.crt into every
// target whose caBundle differs. Any replica may make a change: writes of
// the Secret are conditional (a create fails if another replica created
// the Secret first; an update carries the resourceVersion read), and the
// replica that loses reads again and serves what the winner wrote. So the
// first writer's CA is the one every replica serves, and one change is
// made once, whichever replica makes it; that replica logs it in one line.
//
// The source writes only a Secret that is its own, so that a Secret of
// another application that has the same name keeps its data. It creates
// the Secret with the label SharedLabel=SharedLabelValue
// (certs.ctrlkit.io/managed-by=shared), and every update keeps it. An
// existing Secret with the label is the source's: if it holds no usable
// certificates (a placeholder from the manifests, which must carry the
// label), it is filled in. An existing Secret without the label's key is
// taken only if it holds this layout whole and consistent: the serving
// pair, the signer pair and ca.crt, each key matching its certificate,
// the serving certificate signed by the signer, and ca.crt holding every
// signer. That is a Secret an earlier ctrlkit made, before it set the
// label; the label is added, nothing else changed, and the change logged.
// Any other Secret is left untouched: Ready reports it, with the kubectl
// label command that hands it to the source (its data is then replaced),
// and every round reads it again, so deleting or labelling it takes
// effect without a restart.
//
// # Rotation without a failed call
//
// The API server verifies the webhook's serving certificate with the
// caBundle of the webhook configuration or CRD, so a serving certificate
// may be served only once every target trusts its CA. The rotation keeps
// that true at every moment:
//
//   - The serving certificate is renewed under the same CA once two thirds
//     of its life have passed (Serving.RenewBefore); the bundle does not
//     change, so the new certificate is trusted at once, and a replica
//     still serving the old one serves a valid certificate meanwhile.
//   - A CA is rotated in two steps. When it is due (CA.RenewBefore), a new
//     CA is added to ca.crt (and kept as next-signer), while the serving
//     certificate stays signed by the old CA: every target gets a bundle
//     that trusts both. Only once every target has held the new CA for
//     PublishDelay, as a replica reads them, is a serving certificate
//     signed by the new CA written, and the new CA becomes the signer.
//     The old CA stays in ca.crt until it expires, so replicas that have
//     not yet seen the switch keep serving a trusted certificate.
//   - A replica injects the bundle of a Secret it read after it read the
//     target, and its patch is conditional on the target's
//     resourceVersion; so a replica that is behind never takes a new CA
//     back out of a caBundle.
//   - A serving certificate is never valid beyond the CA that signed it.
//     If the CA expired anyway (the operator was down longer than its
//     life), a new CA and serving certificate are made at once; calls
//     fail until the new bundle is injected, as they failed already.
//
// Targets are re-read every CheckInterval, so a caBundle that someone
// overwrites (kubectl apply of manifests without it) is restored within
// CheckInterval; without targets (a caller that copies CABundle into its
// own configurations), the switch to a new CA waits PublishDelay after a
// replica first saw the new CA, and the caller must copy the new bundle
// within that time.
//
// Ready reports whether this replica serves a certificate that every
// target trusts; it says which target is missing, unreadable or has no
// place for a caBundle (a CRD whose conversion strategy is not Webhook).
//
// # RBAC
//
// A Shared source needs, in its Namespace: get, list, watch, create and
// update on secrets; and cluster-wide: get and patch on
// validatingwebhookconfigurations and mutatingwebhookconfigurations
// (admissionregistration.k8s.io) and customresourcedefinitions
// (apiextensions.k8s.io), for the targets it injects.
//
// Goroutines: SelfSigned.Start and Files.Start run on the caller's
// goroutine and start none. Shared.Start runs its loop on the caller's
// goroutine and a client-go informer on the Secret (a reflector and a
// handler goroutine) that only wakes the loop; it joins them before it
// returns.
package certs
