package certs_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

const (
	namespace  = "operators"
	secretName = "webhook-cert"
)

// crd is as much of apiextensions.k8s.io/v1 CustomResourceDefinition as
// the tests need (the library may not import the apiextensions module).
type crd struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              crdSpec `json:"spec"`
}

type crdSpec struct {
	Group      string         `json:"group"`
	Conversion *crdConversion `json:"conversion,omitempty"`
}

type crdConversion struct {
	Strategy string      `json:"strategy"`
	Webhook  *crdWebhook `json:"webhook,omitempty"`
}

type crdWebhook struct {
	ClientConfig             *admissionv1.WebhookClientConfig `json:"clientConfig,omitempty"`
	ConversionReviewVersions []string                         `json:"conversionReviewVersions"`
}

type crdList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []crd `json:"items"`
}

func (c *crd) DeepCopyObject() runtime.Object     { return jsonCopy(c) }
func (c *crdList) DeepCopyObject() runtime.Object { return jsonCopy(c) }

func jsonCopy[T any](in *T) *T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

var crdGV = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}

// testScheme is client-go's scheme plus crd.
var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypeWithName(crdGV.WithKind("CustomResourceDefinition"), &crd{})
	s.AddKnownTypeWithName(crdGV.WithKind("CustomResourceDefinitionList"), &crdList{})
	metav1.AddToGroupVersion(s, crdGV)
	return s
}()

// webhookCRD returns a CRD with a conversion webhook and no caBundle.
func webhookCRD(name string) *crd {
	return &crd{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: crdSpec{Group: "example.com", Conversion: &crdConversion{
			Strategy: "Webhook",
			Webhook: &crdWebhook{
				ClientConfig:             &admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/convert")},
				ConversionReviewVersions: []string{"v1"},
			},
		}},
	}
}

// validating returns a ValidatingWebhookConfiguration with one webhook
// entry per name and no caBundle.
func validating(name string, webhooks ...string) *admissionv1.ValidatingWebhookConfiguration {
	v := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, w := range webhooks {
		v.Webhooks = append(v.Webhooks, admissionv1.ValidatingWebhook{
			Name:         w,
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/" + w)},
		})
	}
	return v
}

// mutating returns a MutatingWebhookConfiguration with one webhook entry
// per name and no caBundle.
func mutating(name string, webhooks ...string) *admissionv1.MutatingWebhookConfiguration {
	m := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, w := range webhooks {
		m.Webhooks = append(m.Webhooks, admissionv1.MutatingWebhook{
			Name:         w,
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/" + w)},
		})
	}
	return m
}

// newCluster returns a fake API server holding objs.
func newCluster(t testing.TB, objs ...runtime.Object) *fake.Cluster {
	t.Helper()
	c, err := fake.New(fake.Options{Scheme: testScheme, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clients returns a clientset and a dynamic client for the fake whose
// requests pass through wrap (nil: straight to the fake).
func clients(t testing.TB, c *fake.Cluster, wrap func(http.RoundTripper) http.RoundTripper) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg := c.Config()
	if wrap != nil {
		cfg.Transport = wrap(c)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return kube, dyn
}

// newShared returns a Shared source on the fake, with the test's defaults
// for what opts leaves zero.
func newShared(t testing.TB, c *fake.Cluster, wrap func(http.RoundTripper) http.RoundTripper, opts certs.SharedOptions) *certs.Shared {
	t.Helper()
	kube, dyn := clients(t, c, wrap)
	if opts.Namespace == "" {
		opts.Namespace = namespace
	}
	if opts.SecretName == "" {
		opts.SecretName = secretName
	}
	if opts.ServiceName == "" {
		opts.ServiceName = "webhooks"
	}
	s, err := certs.NewShared(kube, dyn, opts)
	if err != nil {
		t.Fatalf("NewShared: %v", err)
	}
	return s
}

// secret returns the shared Secret as the fake stores it.
func secret(t testing.TB, c *fake.Cluster) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(types.NamespacedName{Namespace: namespace, Name: secretName}, &s); err != nil {
		t.Fatalf("reading the Secret: %v", err)
	}
	return &s
}

// secretWrites returns the successful writes of the shared Secret.
func secretWrites(c *fake.Cluster) []*corev1.Secret {
	var out []*corev1.Secret
	for _, w := range c.Writes() {
		if s, ok := w.Object.(*corev1.Secret); ok && w.Err == nil && s.Name == secretName {
			out = append(out, s)
		}
	}
	return out
}

// leaf parses a PEM certificate.
func leaf(t testing.TB, certPEM []byte) *x509.Certificate {
	t.Helper()
	cs, err := parsePEM(certPEM)
	if err != nil || len(cs) == 0 {
		t.Fatalf("parsing %q: %v", certPEM, err)
	}
	return cs[0]
}

// parsePEM parses every certificate in a PEM bundle.
func parsePEM(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return out, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// gate holds the answers to reads of the shared Secret (GET by name) until
// n of them wait, then lets them all go at once, so that n replicas read
// the same version and race to write it. It holds answers only while
// armed.
type gate struct {
	mu      sync.Mutex
	n       int
	waiting []chan struct{}
}

// arm makes the next n reads of the Secret wait for each other.
func (g *gate) arm(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n = n
}

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/secrets/"+secretName) {
			return resp, err
		}
		// The read is done; its answer waits for the others'.
		g.mu.Lock()
		if g.n == 0 {
			g.mu.Unlock()
			return resp, err
		}
		ch := make(chan struct{})
		g.waiting = append(g.waiting, ch)
		if len(g.waiting) == g.n {
			for _, w := range g.waiting {
				close(w)
			}
			g.n, g.waiting = 0, nil
		}
		g.mu.Unlock()
		select {
		case <-ch:
		case <-req.Context().Done():
		case <-time.After(waitTimeout):
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
