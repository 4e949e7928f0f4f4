package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
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
