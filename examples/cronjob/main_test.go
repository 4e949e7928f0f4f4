package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"go.uber.org/goleak"

	"github.com/ctrlkit/ctrlkit/examples/internal/rbactest"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// envtest runs kube-apiserver and etcd only: no Job controller and no
// garbage collector. A Job the tests create stays as created.

var (
	env  *envtest.Environment
	cfg  *rest.Config
	kube kubernetes.Interface
	// admin is ctrlkit's client with the admin's rights, for the tests'
	// own writes and reads (from the server, not a cache).
	admin *client.Client
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "cronjob: KUBEBUILDER_ASSETS is not set: run `make test`")
		os.Exit(1)
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cronjob: starting envtest:", err)
		os.Exit(1)
	}
	kube = kubernetes.NewForConfigOrDie(cfg)
	code := 1
	if err := newAdmin(); err != nil {
		fmt.Fprintln(os.Stderr, "cronjob:", err)
	} else {
		code = m.Run()
	}
	_ = env.Stop()
	if code == 0 {
		if err := goleak.Find(goleakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "cronjob: goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// goleakOptions ignore the goroutines client-go starts once per process
// and never stops.
var goleakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
}

func newAdmin() error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	admin, err = client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, FieldManager: "cronjob-e2e"})
	return err
}

// newNamespace creates a namespace named prefix-<random>, so that tests can
// run again (-count) against the same API server.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// startOperator runs the operator on namespace ns with clock clk until the
// test ends, as a user that has only the permissions of rbac.yaml.
func startOperator(t *testing.T, ns string, clk clock.PassiveClock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	log := funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{Verbosity: 1})
	user := rbactest.User(t, env, kube, "rbac.yaml")
	mgr, err := manager.New(user, manager.Options{
		Name: Name, Logger: log, Scheme: scheme,
		Informers: informer.Options{Namespaces: []string{ns}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, clk); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// eventually polls cond every interval until it returns nil or timeout
// passes, and then fails with cond's last error.
func eventually(t *testing.T, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(interval) // poll interval, not a stand-in for a condition
	}
}

// consistently polls cond every interval for duration and fails at the
// first error it returns.
func consistently(t *testing.T, duration, interval time.Duration, what string, cond func() error) {
	t.Helper()
	for deadline := time.Now().Add(duration); time.Now().Before(deadline); time.Sleep(interval) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}
