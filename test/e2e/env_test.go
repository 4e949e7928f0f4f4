// Package e2e tests ctrlkit against a real kube-apiserver and etcd started
// by envtest: what a controller built on ctrlkit observes when it talks to
// a cluster, end to end.
//
// Every test creates its own namespace (newNamespace) and its own Manager
// limited to that namespace, so tests never see each other's objects; the
// control plane has no controller-manager, so nothing but the tests writes
// to it.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	// env is the envtest control plane shared by the tests; tests use it to
	// provision users with other permissions (env.AddUser).
	env *envtest.Environment
	// cfg is the admin rest config of env.
	cfg *rest.Config
	// kube and dyn are admin clients the tests use to set up and change
	// objects independently of the manager under test.
	kube kubernetes.Interface
	dyn  dynamic.Interface
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBEBUILDER_ASSETS is not set: run `make test` (it builds kube-apiserver and etcd into bin/k8s), or point it at setup-envtest's binaries")
		os.Exit(1)
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{"testdata/crds"},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting envtest: %v\n", err)
		os.Exit(1)
	}
	code := run(m)
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stopping envtest: %v\n", err)
	}
	os.Exit(code)
}

// run builds the admin clients and runs the tests; it returns the exit code.
func run(m *testing.M) int {
	var err error
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building clientset: %v\n", err)
		return 1
	}
	if dyn, err = dynamic.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building dynamic client: %v\n", err)
		return 1
	}
	return m.Run()
}
