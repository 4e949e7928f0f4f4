package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// TestCertsRotateUnderAdmission runs admission calls in a loop while the
// shared certificate rotates, and a second replica joins: the real
// kube-apiserver calls both replicas' webhook servers over TLS, verifying
// them with the caBundle certs.Shared injects. Every response asks the API
// server to close the connection, so every call is a new TLS handshake
// with the certificate served at that moment. Short lifetimes force
// serving certificate renewals (every ~5s) and a CA rotation (due at
// ~13s); the test ends once the serving certificate was renewed, the CA
// switched, both replicas served certificates of the new CA, and calls
// went on after it. No call may fail.
func TestCertsRotateUnderAdmission(t *testing.T) {
	ns := newNamespace(t)
	configName := "ctrlkit-e2e-certs-" + ns
	opts := certs.SharedOptions{
		Namespace:     ns,
		SecretName:    "webhook-cert",
		IPAddresses:   []net.IP{net.IPv4(127, 0, 0, 1)},
		Inject:        certs.Targets{ValidatingWebhookConfigurations: []string{configName}},
		CA:            certs.Lifetime{Validity: 30 * time.Second, RenewBefore: 15 * time.Second},
		Serving:       certs.Lifetime{Validity: 8 * time.Second},
		PublishDelay:  2 * time.Second,
		CheckInterval: time.Second,
	}
	a := startCertReplica(t, "a", opts)
	createCertsWebhookConfig(t, ns, configName, a)
	eventually(t, waitTimeout, func() bool { return a.src.Ready() == nil }, "replica a to be ready (the caBundle injected)")
	first := certsSecret(t, ns, opts.SecretName)
	firstCA := certsPEM(t, first.Data["signer.crt"])

	// The admission loop: ConfigMap creates, each sent through the
	// webhooks of every replica in the configuration.
	var calls, failures atomic.Int64
	var errs sync.Map // error message → first seen
	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "call-"}}
		for loopCtx.Err() == nil {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(loopCtx, cm, metav1.CreateOptions{})
			if loopCtx.Err() != nil {
				return
			}
			calls.Add(1)
			if err != nil {
				failures.Add(1)
				errs.LoadOrStore(err.Error(), time.Now())
			}
		}
	}()
	t.Cleanup(func() { stopLoop(); <-loopDone })
	eventually(t, waitTimeout, func() bool { return a.calls.Load() >= 20 }, "20 admission calls to reach replica a")

	// A second replica reads the same Secret and serves the same
	// certificate; then the API server calls it too.
	b := startCertReplica(t, "b", opts)
	eventually(t, waitTimeout, func() bool { return b.src.Ready() == nil }, "replica b to be ready")
	if b.log.count("created a CA") != 0 || certsSecret(t, ns, opts.SecretName).UID != first.UID {
		t.Fatalf("replica b made a CA of its own instead of using the Secret's")
	}
	eventually(t, waitTimeout, func() bool {
		ca, _ := a.src.GetCertificate(nil)
		cb, _ := b.src.GetCertificate(nil)
		return ca.Leaf.Equal(cb.Leaf)
	}, "both replicas to serve the same certificate")
	addCertReplicaWebhook(t, configName, b)
	eventually(t, waitTimeout, func() bool { return b.calls.Load() >= 20 }, "20 admission calls to reach replica b")

	// Wait for a renewal and a CA rotation, and for calls after both.
	var newCA *x509.Certificate
	var callsAtSwitch int64
	eventually(t, 90*time.Second, func() bool {
		if failures.Load() > 0 {
			return true // reported below
		}
		if newCA == nil {
			signer := certsPEM(t, certsSecret(t, ns, opts.SecretName).Data["signer.crt"])
			if signer.Equal(firstCA) {
				return false
			}
			newCA, callsAtSwitch = signer, calls.Load()
		}
		return a.servedUnder(newCA) && b.servedUnder(newCA) && calls.Load() >= callsAtSwitch+50
	}, "the CA to rotate and both replicas to serve certificates of the new CA to the API server, then 50 more calls")
	stopLoop()
	<-loopDone

	renewals := a.log.count("renewed the serving certificate") + b.log.count("renewed the serving certificate")
	t.Logf("admission calls: %d, failed: %d; TLS handshakes by the API server: replica a %d with %d certificates, replica b %d with %d certificates; serving renewals: %d; CA rotations: %d",
		calls.Load(), failures.Load(), a.handshakes.Load(), a.certificates(), b.handshakes.Load(), b.certificates(),
		renewals, a.log.count("switched the serving certificate")+b.log.count("switched the serving certificate"))
	errs.Range(func(msg, at any) bool {
		t.Errorf("a call failed at %v: %s", at.(time.Time).Format(time.StampMilli), msg)
		return true
	})
	if failures.Load() != 0 {
		t.Fatalf("%d of %d admission calls failed during the rotation, want 0", failures.Load(), calls.Load())
	}
	if renewals == 0 {
		t.Errorf("no serving certificate was renewed under the first CA")
	}
	if a.certificates() < 3 {
		t.Errorf("replica a served %d certificates; want a renewal and a CA rotation to have reached the API server", a.certificates())
	}
}

// certReplica is one operator replica: a Shared certificate source and a
// webhook server answering admission calls with it.
type certReplica struct {
	name       string
	src        *certs.Shared
	srv        *webhook.Server
	log        *certLog
	calls      atomic.Int64 // admission requests answered
	handshakes atomic.Int64

	mu     sync.Mutex
	served map[string]*x509.Certificate // by serial: every certificate a handshake got
}

// startCertReplica starts a replica whose source has opts, and stops it
// when the test ends.
func startCertReplica(t *testing.T, name string, opts certs.SharedOptions) *certReplica {
	t.Helper()
	r := &certReplica{name: name, served: map[string]*x509.Certificate{}}
	opts.Logger, r.log = newCertLog(t, name)
	var err error
	if r.src, err = certs.NewShared(kube, dyn, opts); err != nil {
		t.Fatal(err)
	}
	r.srv, err = webhook.NewServer(webhook.Options{
		Addr:           "127.0.0.1:0",
		GetCertificate: r.getCertificate,
		Logger:         opts.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	admission, err := webhook.NewValidating[*corev1.ConfigMap](scheme.Scheme, allowAll{&r.calls})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Connection", "close") // the next call handshakes again
		admission.ServeHTTP(w, req)
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for what, start := range map[string]func(context.Context) error{"certificate source": r.src.Start, "webhook server": r.srv.Start} {
		wg.Go(func() {
			if err := start(ctx); err != nil {
				t.Errorf("replica %s: %s: Start returned %v", name, what, err)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	eventually(t, waitTimeout, func() bool { return r.srv.Addr() != nil }, "replica %s's webhook server to listen", name)
	return r
}

// getCertificate is the source's, recording what each handshake got.
func (r *certReplica) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := r.src.GetCertificate(hello)
	if err == nil {
		r.handshakes.Add(1)
		r.mu.Lock()
		r.served[c.Leaf.SerialNumber.String()] = c.Leaf
		r.mu.Unlock()
	}
	return c, err
}

// servedUnder reports whether a handshake got a certificate signed by ca.
func (r *certReplica) servedUnder(ca *x509.Certificate) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.served {
		if c.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// certificates returns how many certificates handshakes got.
func (r *certReplica) certificates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.served)
}

// url is where the replica serves the webhook.
func (r *certReplica) url() string { return "https://" + r.srv.Addr().String() + "/validate" }

// allowAll admits every ConfigMap and counts the calls.
type allowAll struct{ calls *atomic.Int64 }

func (v allowAll) ValidateCreate(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	v.calls.Add(1)
	return nil, nil
}

func (v allowAll) ValidateUpdate(context.Context, *corev1.ConfigMap, *corev1.ConfigMap) (webhook.Warnings, error) {
	v.calls.Add(1)
	return nil, nil
}

func (v allowAll) ValidateDelete(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	v.calls.Add(1)
	return nil, nil
}

// certWebhook is the entry of the ValidatingWebhookConfiguration that
// sends creates of ConfigMaps in namespace ns to replica r, failing the
// call if the webhook cannot be reached or verified.
func certWebhook(ns string, r *certReplica, caBundle []byte) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         r.name + ".certs.e2e.ctrlkit.io",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(r.url()), CABundle: caBundle},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		TimeoutSeconds:          ptr.To[int32](10),
	}
}

// createCertsWebhookConfig creates the configuration with replica r's
// entry and no caBundle (r's source injects it), and deletes it when the
// test ends.
func createCertsWebhookConfig(t *testing.T, ns, name string, r *certReplica) {
	t.Helper()
	_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{certWebhook(ns, r, nil)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting %s: %v", name, err)
		}
	})
}

// addCertReplicaWebhook adds an entry for replica r to the configuration,
// with the caBundle its first entry has (so calls to r never meet an empty
// one), conditional on the configuration's resourceVersion.
func addCertReplicaWebhook(t *testing.T, name string, r *certReplica) {
	t.Helper()
	configs := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	for {
		cfg, err := configs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns := cfg.Webhooks[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
		cfg.Webhooks = append(cfg.Webhooks, certWebhook(ns, r, cfg.Webhooks[0].ClientConfig.CABundle))
		_, err = configs.Update(t.Context(), cfg, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // an injection came first
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// certsSecret reads the shared Secret.
func certsSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := kube.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// certsPEM parses the first certificate of a PEM block.
func certsPEM(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM in %q", b)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// certLog is a logger that writes to the test's log, prefixed with the
// replica's name, and keeps the messages to count them.
type certLog struct {
	mu    sync.Mutex
	lines []string
}

func newCertLog(t *testing.T, name string) (logr.Logger, *certLog) {
	l := &certLog{}
	out := testLogger(t)
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
		out.Info(fmt.Sprintf("replica %s: %s %s", name, prefix, args))
	}, funcr.Options{}), l
}

// count returns how many lines contain substr.
func (l *certLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
