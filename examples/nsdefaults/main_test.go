package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "nsdefaults: KUBEBUILDER_ASSETS is not set: run `make test`")
		os.Exit(1)
	}
	env := &envtest.Environment{}
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "nsdefaults: starting envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a stand-in for a condition
	}
}

func TestOperator(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	log := funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{})
	mgr, err := manager.New(cfg, manager.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
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
	kube := kubernetes.NewForConfigOrDie(cfg)
	cms := func(ns string) (*corev1.ConfigMap, error) {
		return kube.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	}
	hasDefaults := func(ns string) func() bool {
		return func() bool {
			cm, err := cms(ns)
			return err == nil && maps.Equal(cm.Data, desiredData) && metav1.IsControlledBy(cm, mustNS(t, kube, ns))
		}
	}
	mkNS := func(name string, labelled bool) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if labelled {
			ns.Labels = map[string]string{Label: "true"}
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Unique names, so the test can run repeatedly on one control plane.
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano()%1_000_000)
	served, plain := "served"+suffix, "plain"+suffix
	mkNS(served, true)
	mkNS(plain, false)
	eventually(t, 20*time.Second, "defaults ConfigMap created in served", hasDefaults(served))

	// Drift: an edit is repaired.
	cm, err := cms(served)
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["log-level"] = "debug"
	if _, err := kube.CoreV1().ConfigMaps(served).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "edited ConfigMap repaired", hasDefaults(served))

	// Drift: a deletion is undone.
	if err := kube.CoreV1().ConfigMaps(served).Delete(ctx, ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "deleted ConfigMap recreated", func() bool {
		c, err := cms(served)
		return err == nil && c.UID != cm.UID && hasDefaults(served)()
	})

	// The unlabelled namespace got nothing, although the controller has
	// since handled every later event (the recreate above).
	if _, err := cms(plain); !apierrors.IsNotFound(err) {
		t.Fatalf("unlabelled namespace has a defaults ConfigMap (err=%v)", err)
	}
	ns := mustNS(t, kube, plain).DeepCopy()
	ns.Labels = map[string]string{Label: "true"}
	if _, err := kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ConfigMap created after labelling plain", hasDefaults(plain))

	// Events were recorded on the namespace.
	eventually(t, 20*time.Second, "a Created event for served", func() bool {
		evs, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + served + ",reason=Created"})
		return err == nil && len(evs.Items) > 0
	})
}

func mustNS(t *testing.T, kube kubernetes.Interface, name string) *corev1.Namespace {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
