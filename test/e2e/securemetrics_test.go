package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestSecureMetrics: with Options.SecureMetrics, the real kube-apiserver
// decides who reads /metrics. A ServiceAccount token whose account is bound
// to a ClusterRole allowing get on the non-resource URL /metrics reads it;
// another ServiceAccount's token gets 403, no token or a forged one 401.
// The server speaks no HTTP/2, and the plain HTTPAddr server keeps the
// probes but no longer serves /metrics.
func TestSecureMetrics(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	scraper := serviceAccountToken(t, ns, "scraper")
	stranger := serviceAccountToken(t, ns, "stranger")
	allowMetrics(t, ns, "scraper")

	mgr := newManager(t, cfg, ns, manager.Options{
		HTTPAddr:      "127.0.0.1:0",
		SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0"},
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	if _, err := mgr.AddController("securemetrics", noop, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, func() bool { return mgr.SecureMetricsAddr() != nil && mgr.Ready() }, "the manager to serve and be ready")
	url := "https://" + mgr.SecureMetricsAddr().String() + "/metrics"

	// A client that offers HTTP/2 and, the certificate being the
	// self-signed default, does not verify it (as Prometheus is told to).
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: waitTimeout}
	scrape := func(token string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", url, err)
		}
		return resp, string(body)
	}

	resp, body := scrape(scraper)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the scraper's token: %d %q, want 200", resp.StatusCode, body)
	}
	for _, want := range []string{`controller_runtime_reconcile_total{controller="securemetrics"`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("a client offering HTTP/2 got %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	if resp, body := scrape(stranger); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+ns+":stranger") {
		t.Errorf("the stranger's token: %d %q, want 403 naming the account", resp.StatusCode, body)
	}
	if resp, body := scrape(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d %q, want 401", resp.StatusCode, body)
	}
	if resp, body := scrape(scraper + "x"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged token: %d %q, want 401", resp.StatusCode, body)
	}

	// A client that speaks only HTTP/2 cannot even complete the handshake.
	if conn, err := tls.Dial("tcp", mgr.SecureMetricsAddr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}); err == nil {
		t.Errorf("a client offering only h2 completed the handshake, negotiating %q; want it refused", conn.ConnectionState().NegotiatedProtocol)
		conn.Close()
	}

	plain := mgr.Addr().String()
	if code, _, err := get(plain, "/metrics"); err != nil || code != http.StatusNotFound {
		t.Errorf("plain GET /metrics: %d %v, want 404", code, err)
	}
	if code, _, err := get(plain, "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("plain GET /readyz: %d %v, want 200", code, err)
	}
}

// serviceAccountToken creates ServiceAccount name in ns and returns a token
// for it from the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount %s/%s: %v", ns, name, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// allowMetrics binds ServiceAccount ns/name to a ClusterRole that allows
// get on /metrics, as kubebuilder's metrics-reader role does, and waits
// until the API server's authorizer knows it (so that no denial is cached).
func allowMetrics(t *testing.T, ns, name string) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader-" + ns},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole: %v", err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + ns + ":" + name
	eventually(t, waitTimeout, func() bool {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user,
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	}, "the API server to authorize %s to get /metrics", user)
}
