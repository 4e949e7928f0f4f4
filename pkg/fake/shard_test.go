package fake_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// The shardSelector tests place objects by hashes computed here, with
// FNV-1a as KEP-5866 defines it, not by the fake's own matching.

const (
	lowerHalf = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
	upperHalf = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
)

func fnv64a(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// shardObjects are 16 ConfigMaps in two namespaces with fixed uids; the
// label half=lower marks those whose uid hashes below 2^63.
func shardObjects() []runtime.Object {
	var objs []runtime.Object
	for i := range 16 {
		uid := fmt.Sprintf("%016x", fnv64a(fmt.Sprint("uid", i))) // FNV-1a barely moves the top bits of "uid-00" to "uid-15"
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%2), Name: fmt.Sprintf("cm-%02d", i),
			UID: types.UID(uid), Labels: map[string]string{"half": "upper"}}}
		if fnv64a(uid) < 1<<63 {
			cm.Labels["half"] = "lower"
		}
		objs = append(objs, cm)
	}
	return objs
}

// shardCluster is a fake holding shardObjects, with Options.ShardSelector
// on or off.
func shardCluster(t *testing.T, on bool) (*fake.Cluster, kubernetes.Interface) {
	t.Helper()
	c, err := fake.New(fake.Options{Objects: shardObjects(), ShardSelector: on})
	if err != nil {
		t.Fatal(err)
	}
	return c, kubernetes.NewForConfigOrDie(c.Config())
}

// want returns the namespace/names of shardObjects that keep selects.
func want(keep func(cm *corev1.ConfigMap) bool) []string {
	var out []string
	for _, obj := range shardObjects() {
		if cm := obj.(*corev1.ConfigMap); keep(cm) {
			out = append(out, cm.Namespace+"/"+cm.Name)
		}
	}
	slices.Sort(out)
	return out
}

func uidBelow(bound uint64) func(*corev1.ConfigMap) bool {
	return func(cm *corev1.ConfigMap) bool { return fnv64a(string(cm.UID)) < bound }
}

// TestShardSelectorList: with Options.ShardSelector, a list selects the
// objects whose uid or namespace hashes into the selector's ranges, with
// the label selector if any, and echoes the selector in metadata.shardInfo
// (re-rendered, as kube-apiserver does), in JSON, in protobuf and as
// metadata only.
func TestShardSelectorList(t *testing.T) {
	lower := want(uidBelow(1 << 63))
	if len(lower) == 0 || len(lower) == 16 {
		t.Fatalf("the fixture's uids all hash to one half (%d of 16 below 2^63): the test would prove nothing", len(lower))
	}
	ns0 := "ns-0"
	nsHash := fmt.Sprintf("shardRange(object.metadata.namespace, '0x%016x', '0x%016x')", fnv64a(ns0), fnv64a(ns0)+1)
	cases := []struct {
		name, selector, labels, echo string
		want                         []string
	}{
		{"lower half", lowerHalf, "", lowerHalf, lower},
		{"upper half, to 2^64", upperHalf, "", upperHalf, want(func(cm *corev1.ConfigMap) bool { return fnv64a(string(cm.UID)) >= 1<<63 })},
		{"two ranges", "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')", "",
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')",
			want(func(cm *corev1.ConfigMap) bool { h := fnv64a(string(cm.UID)); return h < 1<<62 || h >= 3<<62 })},
		{"every hash", "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')", "",
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')", want(func(*corev1.ConfigMap) bool { return true })},
		{"by namespace", nsHash, "", nsHash, want(func(cm *corev1.ConfigMap) bool { return cm.Namespace == ns0 })},
		{"with a label selector", upperHalf, "half=lower", upperHalf, nil},
		{"spaced and double-quoted", " shardRange( object.metadata.uid ,\"0x0000000000000000\",\t'0x8000000000000000' ) ", "", lowerHalf, lower},
	}
	c, _ := shardCluster(t, true)
	md := metadata.NewForConfigOrDie(c.Config())
	for _, ct := range contentTypes {
		cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("")
		for _, tc := range cases {
			t.Run(ct.name+"/"+tc.name, func(t *testing.T) {
				list, err := cms.List(t.Context(), metav1.ListOptions{ShardSelector: tc.selector, LabelSelector: tc.labels})
				if err != nil {
					t.Fatal(err)
				}
				if got := names(list.Items); !slices.Equal(got, tc.want) {
					t.Errorf("listed %v, want %v", got, tc.want)
				}
				if list.ShardInfo == nil || list.ShardInfo.Selector != tc.echo {
					t.Errorf("metadata.shardInfo %+v, want the selector %q", list.ShardInfo, tc.echo)
				}
			})
		}
	}
	t.Run("metadata only", func(t *testing.T) {
		list, err := md.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).List(t.Context(), metav1.ListOptions{ShardSelector: lowerHalf})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range list.Items {
			got = append(got, m.Namespace+"/"+m.Name)
		}
		if !slices.Equal(got, lower) {
			t.Errorf("listed %v, want %v", got, lower)
		}
		if list.ShardInfo == nil || list.ShardInfo.Selector != lowerHalf {
			t.Errorf("metadata.shardInfo %+v, want the selector", list.ShardInfo)
		}
	})
	t.Run("no selector", func(t *testing.T) {
		list, err := clientset(t, c, "application/json").CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 16 || list.ShardInfo != nil {
			t.Errorf("listed %d objects with shardInfo %+v, want all 16 and no shardInfo", len(list.Items), list.ShardInfo)
		}
	})
}

// TestShardSelectorWatch: with Options.ShardSelector, a watch sends the
// events of the objects its selector selects, and only those: the
// initial ADDED events, then those of creates, updates and deletes.
func TestShardSelectorWatch(t *testing.T) {
	_, kube := shardCluster(t, true)
	cms := kube.CoreV1().ConfigMaps("ns-0")
	ctx := t.Context()
	w, err := cms.Watch(ctx, metav1.ListOptions{ShardSelector: lowerHalf, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var wantEvents, selected []string
	for _, key := range want(uidBelow(1 << 63)) {
		if name, ok := strings.CutPrefix(key, "ns-0/"); ok {
			wantEvents = append(wantEvents, "ADDED "+name)
			selected = append(selected, name)
		}
	}
	if len(selected) == 0 {
		t.Fatal("no object of ns-0 in the fixture hashes below 2^63: the test would prove nothing")
	}
	// New objects come and the old ones go, but for one selected object;
	// the last write changes it, so that its event is the last the watch
	// sends.
	for i := range 8 {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fnv64a(string(cm.UID)) < 1<<63 {
			wantEvents = append(wantEvents, "ADDED "+cm.Name)
		}
	}
	last := selected[0]
	for _, key := range want(func(cm *corev1.ConfigMap) bool { return cm.Namespace == "ns-0" }) {
		name := strings.TrimPrefix(key, "ns-0/")
		if name == last {
			continue
		}
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(selected, name) {
			wantEvents = append(wantEvents, "DELETED "+name)
		}
	}
	if _, err := cms.Patch(ctx, last, types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantEvents = append(wantEvents, "MODIFIED "+last)
	if got := readEvents(t, w, len(wantEvents)); !slices.Equal(got, wantEvents) {
		t.Errorf("events\n%v\nwant\n%v", got, wantEvents)
	}
}

// readEvents reads n events of w as "TYPE name".
func readEvents(t *testing.T, w watch.Interface, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(waitTimeout)
	for len(got) < n {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %v", got)
			}
			cm, ok := e.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("event %s of %T, after %v", e.Type, e.Object, got)
			}
			got = append(got, string(e.Type)+" "+cm.Name)
		case <-timeout:
			t.Fatalf("%d events within %v, want %d: %v", len(got), waitTimeout, n, got)
		}
	}
	return got
}

// TestShardSelectorDeleteCollection: a deletecollection with a
// shardSelector deletes the objects it selects, and no other.
func TestShardSelectorDeleteCollection(t *testing.T) {
	_, kube := shardCluster(t, true)
	cms := kube.CoreV1().ConfigMaps("")
	for _, ns := range []string{"ns-0", "ns-1"} {
		if err := kube.CoreV1().ConfigMaps(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{ShardSelector: lowerHalf}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(list.Items), want(func(cm *corev1.ConfigMap) bool { return fnv64a(string(cm.UID)) >= 1<<63 }); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
}

// TestShardSelectorRefused: a shardSelector that does not parse is a 400
// BadRequest for a list, a watch and a deletecollection, saying why (the
// parser's own test has every rule).
func TestShardSelectorRefused(t *testing.T) {
	_, kube := shardCluster(t, true)
	cms := kube.CoreV1().ConfigMaps("ns-0")
	cases := []struct{ selector, why string }{
		{"shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')", `unsupported field path "object.metadata.name"`},
		{"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "16-digit hex value"},
		{"shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')", "must be less than end"},
		{" ", "empty shard selector"},
		{"labels.app == 'x'", "unsupported function"},
		{"shardRange(object.metadata.uid, '0x0000000000000000')", "syntax error"},
	}
	for _, tc := range cases {
		t.Run(tc.selector, func(t *testing.T) {
			opts := metav1.ListOptions{ShardSelector: tc.selector}
			check := func(what string, err error) {
				t.Helper()
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "invalid shard selector") || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("%s: %v, want a BadRequest: invalid shard selector: …%s…", what, err, tc.why)
				}
			}
			_, err := cms.List(t.Context(), opts)
			check("list", err)
			w, err := cms.Watch(t.Context(), opts)
			if err == nil {
				w.Stop()
			}
			check("watch", err)
			check("deletecollection", cms.DeleteCollection(t.Context(), metav1.DeleteOptions{}, opts))
		})
	}
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 8 {
		t.Fatalf("after the refused deletecollections: %d objects in ns-0 (%v), want 8", len(list.Items), err)
	}
}

// TestShardSelectorOff: without Options.ShardSelector, as kube-apiserver
// without its feature gate, the parameter is ignored, even when it does
// not parse, and no list carries shardInfo: a client probing for the
// echo learns the server does not shard.
func TestShardSelectorOff(t *testing.T) {
	_, kube := shardCluster(t, false)
	cms := kube.CoreV1().ConfigMaps("")
	for _, sel := range []string{lowerHalf, "not a selector"} {
		list, err := cms.List(t.Context(), metav1.ListOptions{ShardSelector: sel})
		if err != nil {
			t.Fatalf("list with %q: %v", sel, err)
		}
		if len(list.Items) != 16 || list.ShardInfo != nil {
			t.Errorf("list with %q: %d objects and shardInfo %+v, want all 16 and none", sel, len(list.Items), list.ShardInfo)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := cms.Watch(ctx, metav1.ListOptions{ShardSelector: lowerHalf, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := readEvents(t, w, 16); len(got) != 16 {
		t.Errorf("the watch sent %d initial events, want 16", len(got))
	}
}
