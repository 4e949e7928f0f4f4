package certs_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// A server takes its certificate from a source through GetCertificate, so
// it serves a renewed certificate from its next handshake on. Here a client
// that pins the self-signed certificate calls it.
func ExampleNewSelfSigned() {
	src, err := certs.NewSelfSigned(certs.SelfSignedOptions{}) // localhost, 127.0.0.1 and ::1
	if err != nil {
		fmt.Println(err)
		return
	}
	// A manager would run src.Start(ctx) to renew the certificate.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over TLS")
	}))
	srv.Listener = tls.NewListener(srv.Listener, &tls.Config{GetCertificate: src.GetCertificate})
	srv.Start()
	defer srv.Close()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(src.CABundle())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + srv.Listener.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// Files must exist and hold a valid pair when the source is built; later
// changes that are not valid are logged and the previous pair is kept.
func ExampleNewFiles() {
	_, err := certs.NewFiles(certs.FilesOptions{
		CertFile: "/nonexistent/tls.crt",
		KeyFile:  "/nonexistent/tls.key",
	})
	fmt.Println(err)
	// Output: certs: reading the certificate: open /nonexistent/tls.crt: no such file or directory
}

// A Shared source creates the CA and the serving certificate in the
// Secret, and injects the CA bundle into the webhook configuration; once
// the API server trusts what it serves, Ready returns nil. (The fake
// stands in for the cluster; an operator passes clients of its manager.)
func ExampleNewShared() {
	cluster, err := fake.New(fake.Options{Objects: []runtime.Object{
		&admissionv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets-validation"},
			Webhooks: []admissionv1.ValidatingWebhook{{
				Name: "widgets.example.com",
				ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
					Namespace: "widget-system", Name: "widget-webhooks", Path: ptr.To("/validate"),
				}},
			}},
		},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	kube := kubernetes.NewForConfigOrDie(cluster.Config())
	dyn := dynamic.NewForConfigOrDie(cluster.Config())

	src, err := certs.NewShared(kube, dyn, certs.SharedOptions{
		Namespace:   "widget-system",
		SecretName:  "widget-webhooks-cert",
		ServiceName: "widget-webhooks",
		Inject:      certs.Targets{ValidatingWebhookConfigurations: []string{"widgets-validation"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- src.Start(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); src.Ready() != nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready:", src.Ready())

	var cfg admissionv1.ValidatingWebhookConfiguration
	if err := cluster.Get(types.NamespacedName{Name: "widgets-validation"}, &cfg); err != nil {
		fmt.Println(err)
	}
	fmt.Println("caBundle injected:", bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, src.CABundle()))
	cert, _ := src.GetCertificate(nil)
	fmt.Println("serves:", cert.Leaf.DNSNames)
	cancel()
	fmt.Println("Start:", <-done)
	// Output:
	// ready: <nil>
	// caBundle injected: true
	// serves: [widget-webhooks.widget-system.svc widget-webhooks.widget-system.svc.cluster.local]
	// Start: <nil>
}

// Options are checked when the source is built.
func ExampleNewShared_invalid() {
	_, err := certs.NewShared(&kubernetes.Clientset{}, nil, certs.SharedOptions{
		Namespace:  "widget-system",
		SecretName: "widget-webhooks-cert",
	})
	fmt.Println(err)
	// Output: certs: SharedOptions needs ServiceName, DNSNames or IPAddresses: the serving certificate must name the host the API server calls, usually the webhook Service
}
