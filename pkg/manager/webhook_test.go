package manager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// testSource is a certificate source whose certificate can be withheld,
// and whose Start can fail.
type testSource struct {
	*certs.SelfSigned
	have     atomic.Bool
	startErr error
	started  chan struct{} // closed when Start is called
	stopped  chan struct{} // closed when Start returns
}

func newTestSource(t *testing.T) *testSource {
	ss, err := certs.NewSelfSigned(certs.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &testSource{SelfSigned: ss, started: make(chan struct{}), stopped: make(chan struct{})}
}

func (s *testSource) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if !s.have.Load() {
		return nil, errors.New("the Secret is not read yet")
	}
	return s.SelfSigned.GetCertificate(h)
}

func (s *testSource) Start(ctx context.Context) error {
	close(s.started)
	defer close(s.stopped)
	if s.startErr != nil {
		return s.startErr
	}
	<-ctx.Done()
	return nil
}

// client trusts s's certificate. Connections are not kept alive, so no
// client goroutine outlives a request.
func (s *testSource) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CABundle())
	return &http.Client{Timeout: waitTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// admitConfigMap sends a CREATE AdmissionReview of a ConfigMap named name
// to url and returns the response.
func admitConfigMap(c *http.Client, url, name string) (*admissionv1.AdmissionResponse, error) {
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"}}`, name)
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(obj)}},
	})
	if err != nil {
		return nil, err
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out.Response, nil
}

// noForbidden denies ConfigMaps named "forbidden".
type noForbidden struct{}

func (noForbidden) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	if cm.Name == "forbidden" {
		return nil, errors.New("the name forbidden is taken")
	}
	return nil, nil
}

func (v noForbidden) ValidateUpdate(ctx context.Context, _, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	return v.ValidateCreate(ctx, cm)
}

func (noForbidden) ValidateDelete(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	return nil, nil
}

func coreScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWebhooksServeBeforeSync runs a manager with a webhook server whose
// caches cannot sync yet: the webhooks serve (on every replica, before the
// sync: a conversion webhook may be what the sync waits for), /readyz
// waits for both the caches and the server's certificate, and on shutdown
// the webhooks serve until the Runnables have returned.
func TestWebhooksServeBeforeSync(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	kube := newCluster(t, configMap("default", "a"))
	listing, release := blockList(t, kube)
	src := newTestSource(t)
	m := newManager(t, kube, manager.Options{
		HTTPAddr: "127.0.0.1:0",
		Webhook:  &manager.WebhookOptions{Addr: "127.0.0.1:0", Certificate: src},
	})
	if _, err := informer.For[*corev1.ConfigMap](m.Cache()); err != nil {
		t.Fatal(err)
	}
	validate, err := webhook.NewValidating[*corev1.ConfigMap](coreScheme(t), noForbidden{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Webhooks().Register("/validate", validate); err != nil {
		t.Fatal(err)
	}
	// On shutdown, a Runnable's last write still gets through the webhook.
	var onShutdown atomic.Value
	if err := m.Add(runnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		_, err := admitConfigMap(src.client(), "https://"+m.Webhooks().Addr().String()+"/validate", "last")
		onShutdown.Store(fmt.Sprint(err))
		return nil
	})); err != nil {
		t.Fatal(err)
	}

	running := run(t, m)
	<-listing // the informers started; their sync is blocked
	select {
	case <-src.started:
	case <-time.After(waitTimeout):
		t.Fatal("the certificate source was not started before the caches synced")
	}
	eventually(t, "the webhook server to listen", func() bool { return m.Webhooks().Addr() != nil })
	url := "https://" + m.Webhooks().Addr().String() + "/validate"
	if err := m.Webhooks().Ready(); err == nil || err.Error() != "webhook: no serving certificate yet: the Secret is not read yet" {
		t.Errorf("the webhook server's Ready without a certificate = %v", err)
	}
	src.have.Store(true)
	eventually(t, "the webhook server to be ready", func() bool { return m.Webhooks().Ready() == nil })
	resp, err := admitConfigMap(src.client(), url, "forbidden")
	if err != nil || resp.Allowed || resp.Result.Message != "the name forbidden is taken" {
		t.Fatalf("the webhook before the caches synced answered %+v, %v; want the validator's denial", resp, err)
	}
	health := "http://" + m.Addr().String()
	if code, body := getURL(t, health+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready: caches have not synced, or the manager is stopping\n" {
		t.Errorf("/readyz before the caches synced = %d %q", code, body)
	}

	release()
	eventually(t, "the manager to be ready", m.Ready)
	if code, _ := getURL(t, health+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once synced and serving = %d, want 200", code)
	}
	src.have.Store(false)
	if m.Ready() {
		t.Error("Ready while the webhook server has no certificate")
	}
	if code, body := getURL(t, health+"/readyz"); code != http.StatusServiceUnavailable ||
		body != "not ready: webhook: no serving certificate yet: the Secret is not read yet\n" {
		t.Errorf("/readyz without a webhook certificate = %d %q", code, body)
	}
	src.have.Store(true)
	_, metrics := getURL(t, health+"/metrics")
	if want := `controller_runtime_webhook_requests_total{code="200",webhook="/validate"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics has no line %s", want)
	}

	if err := running.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := onShutdown.Load(); got != "<nil>" {
		t.Errorf("a webhook call from a stopping Runnable failed: %v", got)
	}
	select {
	case <-src.stopped:
	default:
		t.Error("Run returned before the certificate source's Start")
	}
	if _, err := admitConfigMap(src.client(), url, "after"); err == nil {
		t.Error("the webhook server still serves after Run returned")
	}
	goleak.VerifyNone(t, leaks)
}

// TestWebhookFailureStopsRun checks that a certificate source or a webhook
// server that fails stops Run with its error, even while the caches wait
// to sync.
func TestWebhookFailureStopsRun(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name     string
		addr     string
		startErr error
		want     string
	}{
		{"the source fails", "127.0.0.1:0", errors.New("cannot write the Secret"), "manager: webhook certificate source: cannot write the Secret"},
		{"the port is taken", busy.Addr().String(), nil, fmt.Sprintf("manager: webhook server: webhook: listening on %q: ", busy.Addr())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := newCluster(t)
			failList(kube) // the caches never sync
			src := newTestSource(t)
			src.startErr = tc.startErr
			m := newManager(t, kube, manager.Options{Webhook: &manager.WebhookOptions{Addr: tc.addr, Certificate: src}})
			if _, err := informer.For[*corev1.ConfigMap](m.Cache()); err != nil {
				t.Fatal(err)
			}
			err := run(t, m).wait(t)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Run = %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

func TestWebhookOptionsInvalid(t *testing.T) {
	src := newTestSource(t)
	for _, tc := range []struct {
		name string
		opts manager.WebhookOptions
		want string
	}{
		{"no certificate", manager.WebhookOptions{},
			"manager: Options.Webhook.Certificate is nil: pass a certificate source, such as package certs's"},
		{"a nil certificate", manager.WebhookOptions{Certificate: (*testSource)(nil)},
			"manager: Options.Webhook.Certificate is nil"},
		{"bad Addr", manager.WebhookOptions{Addr: "localhost", Certificate: src},
			`manager: Options.Webhook.Addr is "localhost": use host:port such as ":9443" or "127.0.0.1:0", or empty for ":9443"`},
		{"the port of HTTPAddr", manager.WebhookOptions{Addr: "127.0.0.1:8081", Certificate: src},
			`manager: Options.Webhook.Addr "127.0.0.1:8081" and Options.HTTPAddr ":8081" share a port: serve them apart, e.g. webhooks on ":9443"`},
		{"the port of secure metrics", manager.WebhookOptions{Addr: ":8443", Certificate: src},
			`manager: Options.Webhook.Addr ":8443" and Options.SecureMetrics.Addr ":8443" share a port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wo := tc.opts
			_, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
				Webhook: &wo, HTTPAddr: ":8081", SecureMetrics: &manager.SecureMetricsOptions{}})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("New = %v,\nwant an error starting %q", err, tc.want)
			}
			if wo.Addr != tc.opts.Addr || wo.Certificate != tc.opts.Certificate || wo.HTTP2 != tc.opts.HTTP2 {
				t.Errorf("New changed the caller's WebhookOptions to %+v", wo)
			}
		})
	}
}

// readySource is a testSource that says whether the API server trusts
// its certificate yet.
type readySource struct {
	*testSource
	trusted atomic.Bool
}

func (s *readySource) Ready() error {
	if !s.trusted.Load() {
		return errors.New("the caBundles do not hold the CA yet")
	}
	return nil
}

// TestWebhookSourceReady checks that /readyz asks a certificate source that
// can say whether it is ready.
func TestWebhookSourceReady(t *testing.T) {
	src := &readySource{testSource: newTestSource(t)}
	src.have.Store(true)
	m := newManager(t, newCluster(t), manager.Options{Webhook: &manager.WebhookOptions{Addr: "127.0.0.1:0", Certificate: src}})
	r := run(t, m)
	eventually(t, "the webhook server to be ready", func() bool { return m.Webhooks().Ready() == nil })
	eventually(t, "the caches to sync", func() bool {
		_, body := get(t, m.Handler(), "/readyz")
		return !strings.Contains(body, "caches")
	})
	if code, body := get(t, m.Handler(), "/readyz"); code != http.StatusServiceUnavailable ||
		body != "not ready: webhook certificate: the caBundles do not hold the CA yet\n" {
		t.Errorf("/readyz while the source is not ready = %d %q", code, body)
	}
	src.trusted.Store(true)
	if code, _ := get(t, m.Handler(), "/readyz"); code != http.StatusOK || !m.Ready() {
		t.Errorf("/readyz once the source is ready = %d", code)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestWebhooksWithoutOptions(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	if m.Webhooks() != nil {
		t.Fatal("Webhooks without Options.Webhook is not nil")
	}
	err := m.Webhooks().Register("/validate", http.NotFoundHandler())
	if err == nil || !strings.Contains(err.Error(), "set manager.Options.Webhook") {
		t.Errorf("Register without Options.Webhook = %v, want an error naming the option", err)
	}
}
