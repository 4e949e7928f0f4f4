package informer_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestForBuiltInWithConfig: with Clients.Config, a built-in type's informer
// lists and watches through ctrlkit's own REST client (builtin.go). The
// fake API server answers in JSON, which that client decodes once the body
// is in; kube-apiserver answers in protobuf, decoded while read (the e2e
// suites, and internal/protolist's tests).
func TestForBuiltInWithConfig(t *testing.T) {
	cm := func(ns, name, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "x"}},
			Data: map[string]string{"v": v}}
	}
	cluster := newFakeCluster(t, nil, cm("a", "one", "1"), cm("b", "two", "2"))
	clients := fakeClients(t, cluster)
	c, err := informer.New(clients, informer.Options{ByType: map[runtime.Object]informer.TypeOptions{
		&corev1.ConfigMap{}: {Namespaces: []string{"a"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	got, err := cms.Lister().Get("a", "one")
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["v"] != "1" || got.Labels["app"] != "x" {
		t.Errorf("cached %+v", got)
	}
	if _, err := cms.Lister().Get("b", "two"); err == nil {
		t.Error("namespace b is cached; only a was asked for")
	}
	kube, err := kubernetes.NewForConfig(clients.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("a").Update(t.Context(), cm("a", "one", "changed"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the update in the cache", func() bool {
		o, err := cms.Lister().Get("a", "one")
		return err == nil && o.Data["v"] == "changed"
	})
}
