package e2e

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestShareMetadataFromTheAPIServer: with informer.Options.ShareMetadata,
// ConfigMaps listed from kube-apiserver in protobuf (shared while the list
// decodes) each hold the labels and annotations they were created with,
// equal label sets share one map, and a change to one object's labels
// changes that object alone.
func TestShareMetadataFromTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	const n = 30
	want := make(map[string]map[string]string, n)
	for i := range n {
		l := map[string]string{"app": "shared"}
		if i%7 == 0 {
			l["own"] = fmt.Sprint(i)
		}
		name := fmt.Sprintf("cm-%02d", i)
		want[name] = l
		cm := createConfigMap(t, ns, name, map[string]string{"i": fmt.Sprint(i)}, l)
		if i%3 == 0 {
			cm.Annotations = map[string]string{"third": name}
			if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mgr := newManager(t, cfg, ns, manager.Options{Informers: informer.Options{ShareMetadata: true}})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := informer.WaitForSources(ctx, testLogger(t), time.Second, cms); err != nil {
		t.Fatal(err)
	}
	mapOf := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }
	var common uintptr
	for i := range n {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Lister().Get(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cm.Labels, want[name]) || cm.Data["i"] != fmt.Sprint(i) {
			t.Errorf("%s: labels %v, data %v; want labels %v", name, cm.Labels, cm.Data, want[name])
		}
		if got := cm.Annotations["third"]; (i%3 == 0) != (got == name) || (i%3 != 0 && len(cm.Annotations) > 0) {
			t.Errorf("%s: annotations %v", name, cm.Annotations)
		}
		if i%7 == 0 {
			continue
		}
		if common == 0 {
			common = mapOf(cm.Labels)
		} else if mapOf(cm.Labels) != common {
			t.Errorf("%s: its labels %v are not the map the others with the same labels share", name, cm.Labels)
		}
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm-01", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["app"] = "changed"
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool {
		o, err := cms.Lister().Get(ns, "cm-01")
		return err == nil && o.Labels["app"] == "changed"
	}, "cm-01's new labels in the cache")
	for _, name := range []string{"cm-02", "cm-03"} {
		if o, err := cms.Lister().Get(ns, name); err != nil || o.Labels["app"] != "shared" {
			t.Errorf("%s after cm-01's labels changed: %v, %v", name, o.Labels, err)
		}
	}
}
