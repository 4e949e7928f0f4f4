package shard

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func partialMeta(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		ResourceVersion: "rv-" + name, Labels: map[string]string{"app": "web", DrainLabel("web"): "true"},
		Annotations: map[string]string{"big": "value"}}}
}

// TestUnlabelledStore: the store keeps what the sharder reads of each
// object, tells of every object stored, forgets deleted ones, drops its
// map once empty, and a Replace leaves exactly the list.
func TestUnlabelledStore(t *testing.T) {
	s := &labelSharder{opts: labelSharderOptions{Ring: "web"}, shardLabel: ShardLabel("web"), drainLabel: DrainLabel("web")}
	var told []string
	u := &unlabelled{snap: s.snapOf, added: func(key cache.ObjectName, sn snap) { told = append(told, key.Name) }}
	get := func(name string) *snap {
		if sn, ok := u.get("ns", name); ok {
			return &sn
		}
		return nil
	}
	if u.hasSynced() {
		t.Fatal("synced before a list")
	}
	if err := u.Replace([]any{partialMeta("a"), partialMeta("b"), &corev1.ConfigMap{}}, "1"); err != nil {
		t.Fatal(err)
	}
	if !u.hasSynced() || !slices.Equal(told, []string{"a", "b"}) {
		t.Fatalf("after a list of a and b: synced %v, told %q", u.hasSynced(), told)
	}
	if sn := get("a"); sn == nil || *sn != (snap{rv: "rv-a", drain: "true"}) {
		t.Fatalf("a stored as %+v, want its resourceVersion and the ring's labels", sn)
	}
	if err := u.Update(partialMeta("a")); err != nil {
		t.Fatal(err)
	}
	if err := u.Add(partialMeta("c")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(told, []string{"a", "b", "a", "c"}) {
		t.Fatalf("told %q", told)
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := u.Delete(partialMeta(name)); err != nil {
			t.Fatal(err)
		}
	}
	if get("a") != nil || u.objs != nil {
		t.Fatalf("after deleting everything: a %v, map %v (want none, and the map given back)", get("a"), u.objs)
	}
	if err := u.Add(partialMeta("d")); err != nil {
		t.Fatal(err)
	}
	if err := u.Replace([]any{partialMeta("e")}, "2"); err != nil {
		t.Fatal(err)
	}
	if get("d") != nil || get("e") == nil {
		t.Fatalf("after a relist of e alone: d %v, e %v", get("d"), get("e"))
	}
}
