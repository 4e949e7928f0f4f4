package manager_test

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// Serve /metrics (and pprof) over HTTPS on :8443 to the scrapers the
// cluster authorizes, and the health probes in plain HTTP on :8081, as
// kubebuilder's scaffold lays them out. The operator's ServiceAccount
// needs create on tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io; the scraper's, get on the
// nonResourceURLs "/metrics" (and "/debug/pprof/*" for profiles). The two
// servers cannot share a port.
func ExampleSecureMetricsOptions() {
	cfg := &rest.Config{Host: "https://cluster.invalid:6443"} // manager.GetConfig() in a program
	_, err := manager.New(cfg, manager.Options{
		HTTPAddr:      ":8081",
		SecureMetrics: &manager.SecureMetricsOptions{Pprof: true}, // Addr ":8443", a self-signed certificate
	})
	fmt.Println(err)

	_, err = manager.New(cfg, manager.Options{HTTPAddr: ":8443", SecureMetrics: &manager.SecureMetricsOptions{}})
	fmt.Println(err)
	// Output:
	// <nil>
	// manager: Options.SecureMetrics.Addr ":8443" and Options.HTTPAddr ":8443" share a port: serve them apart, e.g. secure metrics on ":8443" and health probes on ":8081"
}
