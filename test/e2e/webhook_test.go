package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// TestWebhookAdmissionAndConversion: the real kube-apiserver calls a
// manager's webhooks over TLS. The manager's cache of v1alpha1 Gizmos
// syncs although the API server must call the manager's own conversion
// webhook to list them (the webhook server starts before the sync). A
// validating webhook denies with the validator's message, a defaulting one
// fills fields in, and a Gizmo written as v1alpha1 reads back as v1 and the
// reverse, through the conversion webhook; a failed conversion reaches the
// client.
func TestWebhookAdmissionAndConversion(t *testing.T) {
	ns := newNamespace(t)
	caPEM, serving := newServingCert(t)
	src := &staticCert{}
	src.cert.Store(serving)
	// The CRD names the conversion webhook's URL before the manager runs,
	// so its port is picked here.
	addr := freeAddr(t)
	base := "https://" + addr
	installGizmoCRD(t, base+"/convert-gizmos", caPEM)
	gizmos := func(gv schema.GroupVersion) dynamic.ResourceInterface {
		return dyn.Resource(gv.WithResource("gizmos")).Namespace(ns)
	}
	// Stored as v1: no conversion yet.
	if _, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "stored", map[string]any{"size": int64(7), "color": "green"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	scheme := gizmoScheme()
	mgr := newManager(t, cfg, ns, manager.Options{
		Scheme:  scheme,
		Webhook: &manager.WebhookOptions{Addr: addr, Certificate: src},
	})
	// Listing v1alpha1 Gizmos needs the conversion webhook.
	old, err := informer.For[*GizmoV1alpha1](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	validate, err := webhook.NewValidating[*Gizmo](scheme, gizmoValidator{})
	if err != nil {
		t.Fatal(err)
	}
	mutate, err := webhook.NewDefaulting[*Gizmo](scheme, webhook.DefaulterFunc[*Gizmo](defaultGizmo))
	if err != nil {
		t.Fatal(err)
	}
	convert, err := webhook.NewConversion(scheme, &Gizmo{}, &GizmoV1alpha1{})
	if err != nil {
		t.Fatal(err)
	}
	for path, h := range map[string]http.Handler{"/validate-gizmos": validate, "/default-gizmos": mutate, "/convert-gizmos": convert} {
		if err := mgr.Webhooks().Register(path, h); err != nil {
			t.Fatal(err)
		}
	}
	start(t, mgr) // before the webhook configurations: its cleanup runs after theirs
	eventually(t, waitTimeout, mgr.Ready, "the cache of v1alpha1 Gizmos to sync through the manager's own conversion webhook")
	if g, err := old.Lister().Get(ns, "stored"); err != nil || g.Spec.Colour != "green" || g.Spec.Size != 7 {
		t.Fatalf("the cached v1alpha1 Gizmo: %+v, %v; want colour green, size 7", g, err)
	}

	installGizmoWebhooks(t, ns, base, caPEM)
	// The API server's webhook configurations are informed: wait until a
	// dry run goes through both webhooks.
	eventually(t, waitTimeout, func() bool {
		got, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "probe", map[string]any{}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Object["spec"].(map[string]any)["color"] == "blue"
	}, "a dry run to be defaulted")
	eventually(t, waitTimeout, func() bool {
		_, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "probe", map[string]any{"color": "red"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, "a dry run to be validated")

	t.Run("a validating webhook denies with the validator's message", func(t *testing.T) {
		_, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "scarlet", map[string]any{"color": "red"}), metav1.CreateOptions{})
		want := `admission webhook "validate.gizmos.hooks.e2e.ctrlkit.io" denied the request: spec.color "red" is not allowed: pick blue or green`
		if err == nil || err.Error() != want || !apierrors.IsForbidden(err) {
			t.Errorf("creating a red Gizmo: %v,\nwant a 403 %q", err, want)
		}
		if _, err := gizmos(hooksV1).Get(t.Context(), "scarlet", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the denied Gizmo exists: %v", err)
		}
		big, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "big", map[string]any{"size": int64(5)}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		big.Object["spec"].(map[string]any)["size"] = int64(2)
		_, err = gizmos(hooksV1).Update(t.Context(), big, metav1.UpdateOptions{})
		want = `admission webhook "validate.gizmos.hooks.e2e.ctrlkit.io" denied the request: spec.size cannot shrink (from 5 to 2)`
		if err == nil || err.Error() != want {
			t.Errorf("shrinking a Gizmo: %v,\nwant %q", err, want)
		}
	})

	t.Run("a defaulting webhook fills fields", func(t *testing.T) {
		created, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "plain", map[string]any{"size": int64(3)}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := gizmos(hooksV1).Get(t.Context(), "plain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []*unstructured.Unstructured{created, stored} {
			if spec := u.Object["spec"]; fmt.Sprint(spec) != "map[color:blue size:3]" {
				t.Errorf("spec = %v, want color defaulted to blue and size kept at 3", spec)
			}
		}
	})

	t.Run("v1alpha1 is read back as v1", func(t *testing.T) {
		if _, err := gizmos(hooksV1alpha1).Create(t.Context(), gizmo(hooksV1alpha1, "old", map[string]any{"size": int64(2), "colour": "green"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := gizmos(hooksV1).Get(t.Context(), "old", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAPIVersion() != hooksV1.String() || fmt.Sprint(got.Object["spec"]) != "map[color:green size:2]" {
			t.Errorf("read as v1: %s %v, want %s with color green and size 2", got.GetAPIVersion(), got.Object["spec"], hooksV1)
		}
	})

	t.Run("v1 is read back as v1alpha1", func(t *testing.T) {
		if _, err := gizmos(hooksV1).Create(t.Context(), gizmo(hooksV1, "new", map[string]any{"size": int64(4), "color": "green"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := gizmos(hooksV1alpha1).Get(t.Context(), "new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAPIVersion() != hooksV1alpha1.String() || fmt.Sprint(got.Object["spec"]) != "map[colour:green size:4]" {
			t.Errorf("read as v1alpha1: %s %v, want %s with colour green and size 4", got.GetAPIVersion(), got.Object["spec"], hooksV1alpha1)
		}
		list, err := gizmos(hooksV1alpha1).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			if item.GetAPIVersion() != hooksV1alpha1.String() || item.Object["spec"].(map[string]any)["color"] != nil {
				t.Errorf("listed as v1alpha1: %s %v", item.GetAPIVersion(), item.Object["spec"])
			}
		}
	})

	t.Run("a failed conversion reaches the client", func(t *testing.T) {
		_, err := gizmos(hooksV1alpha1).Create(t.Context(), gizmo(hooksV1alpha1, "tartan", map[string]any{"colour": "plaid"}), metav1.CreateOptions{})
		want := fmt.Sprintf(`converting object 0 (%s/tartan) to hooks.e2e.ctrlkit.io/v1: colour "plaid" has no v1 color`, ns)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating a plaid v1alpha1 Gizmo: %v,\nwant an error containing %q", err, want)
		}
	})

	if n := webhookRequests(t, mgr, "/convert-gizmos"); n == 0 {
		t.Error("the conversion webhook counted no requests")
	}
}

// TestWebhookReadyz: the manager's /readyz fails, naming the webhook
// server, until the server has a certificate to serve; once ready, the
// server completes TLS handshakes.
func TestWebhookReadyz(t *testing.T) {
	ns := newNamespace(t)
	caPEM, serving := newServingCert(t)
	src := &staticCert{} // no certificate yet
	mgr := newManager(t, cfg, ns, manager.Options{
		HTTPAddr: "127.0.0.1:0",
		Webhook:  &manager.WebhookOptions{Addr: "127.0.0.1:0", Certificate: src},
	})
	start(t, mgr)
	eventually(t, waitTimeout, func() bool { return mgr.Addr() != nil && mgr.Webhooks().Addr() != nil }, "the servers to listen")
	health := "http://" + mgr.Addr().String() + "/readyz"
	notReady := "not ready: webhook: no serving certificate yet: no certificate yet\n"
	eventually(t, waitTimeout, func() bool {
		_, body, err := get(mgr.Addr().String(), "/readyz")
		return err == nil && body == notReady
	}, "/readyz to wait for the webhook server only")
	if code, _, err := get(mgr.Addr().String(), "/readyz"); err != nil || code != 503 {
		t.Errorf("GET %s = %d, %v; want 503", health, code, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	dial := func() error {
		conn, err := tls.Dial("tcp", mgr.Webhooks().Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dial(); err == nil {
		t.Error("a TLS handshake succeeded without a certificate")
	}

	src.cert.Store(serving)
	eventually(t, waitTimeout, func() bool {
		code, _, err := get(mgr.Addr().String(), "/readyz")
		return err == nil && code == 200
	}, "/readyz to pass once the webhook server has a certificate")
	if err := dial(); err != nil {
		t.Errorf("a TLS handshake once ready: %v", err)
	}
}

// staticCert is a manager.CertificateSource serving the certificate
// stored in it, or none.
type staticCert struct {
	cert atomic.Pointer[tls.Certificate]
}

func (s *staticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no certificate yet")
}

func (s *staticCert) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago, for
// a server whose address must be known before it listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newServingCert makes a throwaway CA and a serving certificate it signed
// for 127.0.0.1, the address the API server calls; it returns the CA in
// PEM, for caBundles.
func newServingCert(t *testing.T) (caPEM []byte, serving *tls.Certificate) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctrlkit e2e webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// installGizmoCRD creates the Gizmo CRD with its conversion webhook at url
// and waits until both versions are served. A cleanup deletes it and waits
// until it is gone.
func installGizmoCRD(t *testing.T, url string, caPEM []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/webhook/gizmos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	cc := []string{"spec", "conversion", "webhook", "clientConfig"}
	if err := unstructured.SetNestedField(u.Object, url, append(cc, "url")...); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(caPEM), append(cc, "caBundle")...); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", u.GetName(), err)
	}
	t.Cleanup(func() {
		if err := dyn.Resource(crdGVR).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting CRD %s: %v", u.GetName(), err)
		}
		// Gone before the next test (or -count) installs it again.
		eventually(t, waitTimeout, func() bool {
			_, err := dyn.Resource(crdGVR).Get(context.Background(), u.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "CRD %s to be deleted", u.GetName())
	})
	for _, gv := range []schema.GroupVersion{hooksV1, hooksV1alpha1} {
		eventually(t, waitTimeout, func() bool {
			_, err := dyn.Resource(gv.WithResource("gizmos")).List(t.Context(), metav1.ListOptions{Limit: 1})
			return err == nil
		}, "%s gizmos to be served", gv)
	}
}

// installGizmoWebhooks registers the validating and mutating webhooks of
// v1 Gizmos in namespace ns at base, and deletes them when the test ends
// (before the manager stops: the cleanups of start run after).
func installGizmoWebhooks(t *testing.T, ns, base string, caPEM []byte) {
	t.Helper()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{hooksV1.Group}, APIVersions: []string{hooksV1.Version},
			Resources: []string{"gizmos"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	// Only this test's namespace, so no other test meets the webhooks.
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	config := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: caPEM}
	}
	name := "ctrlkit-e2e-" + ns
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.gizmos.hooks.e2e.ctrlkit.io", ClientConfig: config("/validate-gizmos"), Rules: rules,
			NamespaceSelector: selector, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "default.gizmos.hooks.e2e.ctrlkit.io", ClientConfig: config("/default-gizmos"), Rules: rules,
			NamespaceSelector: selector, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting %s: %v", vwc.Name, err)
		}
		if err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting %s: %v", mwc.Name, err)
		}
	})
}

// gizmo is a Gizmo of version gv named name with spec.
func gizmo(gv schema.GroupVersion, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(), "kind": "Gizmo",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// webhookRequests is controller_runtime_webhook_requests_total of path
// with code 200, from the manager's registry.
func webhookRequests(t *testing.T, mgr *manager.Manager, path string) float64 {
	t.Helper()
	v, _ := metricsOf(t, mgr).get("controller_runtime_webhook_requests_total", "code", "200", "webhook", path)
	return v
}
