package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	widgetGVR = schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"}
	widgetGK  = schema.GroupKind{Group: "test.ctrlkit.io", Kind: "Widget"}
	cmGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func widget(i int) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "test.ctrlkit.io/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("w%02d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
	}
}

func child(i int) *metav1.PartialObjectMetadata {
	w := widget(i)
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: w.Name + "-cm", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "test.ctrlkit.io/v1", Kind: "Widget", Name: w.Name, UID: w.UID, Controller: new(true),
		}}},
	}
}

// sharderEnv is a Sharder over fake clients, with its ring's Leases.
type sharderEnv struct {
	t     *testing.T
	kube  *kubefake.Clientset
	md    *metadatafake.FakeMetadataClient
	clock *clocktesting.FakeClock
	rv    int
	n     int // widgets, each with a child
	// unsettled names the first widget settled found not yet settled,
	// for a failure.
	unsettled string
}

func (e *sharderEnv) renew(member string) {
	e.t.Helper()
	e.rv++
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "leases", Name: LeaseName("web", member), ResourceVersion: fmt.Sprint(e.rv)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new(member), LeaseDurationSeconds: new(int32(15)),
			RenewTime: &metav1.MicroTime{Time: e.clock.Now()}},
	}
	leases := e.kube.CoordinationV1().Leases("leases")
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		if _, err := leases.Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// labels returns every widget's and ConfigMap's shard and drain labels.
func (e *sharderEnv) labels(gvr schema.GroupVersionResource, name string) (owner string, draining bool) {
	m, err := e.md.Resource(gvr).Namespace("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Labels[ShardLabel("web")], m.Labels[DrainLabel("web")] != ""
}

// eventuallyT polls cond until it holds or 10s have passed.
func eventuallyT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// startSharder runs a Sharder of ring "web" over n widgets, each with a
// ConfigMap child, with members a and b alive; md, when not nil, wraps
// the fake metadata client the sharder reads through. It returns once
// every widget is assigned, with its child.
func startSharder(t *testing.T, n int, md func(metadata.Interface) metadata.Interface) *sharderEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, widget(i), child(i))
	}
	e := &sharderEnv{t: t, n: n, kube: kubefake.NewClientset(), md: metadatafake.NewSimpleMetadataClient(scheme, objs...),
		clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	e.renew("a")
	e.renew("b")
	var reads metadata.Interface = e.md
	if md != nil {
		reads = md(e.md)
	}
	s, err := newLabelSharder(labelSharderOptions{
		Ring: "web", Namespace: "leases", Kube: e.kube, Metadata: reads, Clock: e.clock, Logger: logr.Discard(),
		Resources: []Resource{{Resource: widgetGVR, Kind: widgetGK, Primary: true}, {Resource: cmGVR, Kind: schema.GroupKind{Kind: "ConfigMap"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Start(ctx); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last unsettled: %s", e.unsettled)
		}
	})
	eventuallyT(t, "every widget assigned to a or b, with its child", e.settled("a", "b"))
	return e
}

// settled reports whether every widget is on one of members, not
// draining, with its child on the same member.
func (e *sharderEnv) settled(members ...string) func() bool {
	return func() bool {
		for i := range e.n {
			w, d := e.labels(widgetGVR, widget(i).Name)
			c, cd := e.labels(cmGVR, child(i).Name)
			if d || c != w || !contains(members, w) {
				e.unsettled = fmt.Sprintf("widget %d on %q (draining %v), its child on %q (draining %v), members %q", i, w, d, c, cd, members)
				return false
			}
		}
		return true
	}
}

// draining reports whether each of widgets is draining, not yet on c.
func (e *sharderEnv) draining(widgets []int) func() bool {
	return func() bool {
		for _, i := range widgets {
			if owner, d := e.labels(widgetGVR, widget(i).Name); !d || owner == "c" {
				return false
			}
		}
		return true
	}
}

// acknowledge removes both ring labels of each of widgets, as their
// owner does when it answers a drain.
func (e *sharderEnv) acknowledge(ctx context.Context, widgets []int) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, ShardLabel("web"), DrainLabel("web"))
	for _, i := range widgets {
		if _, err := e.md.Resource(widgetGVR).Namespace("ns").Patch(ctx, widget(i).Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// joining returns the widgets that move to member c when it joins a and b.
func joining(t *testing.T, n int) []int {
	t.Helper()
	three := NewRing("a", "b", "c")
	var moving []int
	for i := range n {
		if three.Owner("ns/"+widget(i).Name) == "c" {
			moving = append(moving, i)
		}
	}
	if len(moving) == 0 {
		t.Fatal("the ring gives c nothing: pick other names")
	}
	return moving
}

// TestSharder: objects are assigned by the ring with their children; a
// new member gets its share only through drains its owners acknowledge;
// a dead member's objects move directly.
func TestSharder(t *testing.T) {
	const n = 30
	e := startSharder(t, n, nil)
	ctx := t.Context()
	want := NewRing("a", "b")
	for i := range n {
		if got, _ := e.labels(widgetGVR, widget(i).Name); got != want.Owner("ns/"+widget(i).Name) {
			t.Errorf("widget %d on %s, the ring says %s", i, got, want.Owner("ns/"+widget(i).Name))
		}
	}

	// c joins: the widgets the ring gives it are drained, not moved.
	e.renew("c")
	moving := joining(t, n)
	eventuallyT(t, "the widgets moving to c to be draining", e.draining(moving))
	// Their owners acknowledge: both labels removed.
	e.acknowledge(ctx, moving)
	eventuallyT(t, "the acknowledged widgets, and their children, on c", e.settled("a", "b", "c"))

	// b dies: its widgets move without a drain once its Lease expired. a
	// and c renew every half second of the fake clock as it runs past b's
	// lease, so that however late the sharder's informer sees a renewal,
	// theirs never look expired (stepping 16s at once made a look dead
	// whenever its renewal was seen after the step: a flake).
	eventuallyT(t, "b's widgets on a or c", func() bool {
		e.renew("a")
		e.renew("c")
		e.clock.Step(500 * time.Millisecond)
		return e.settled("a", "c")()
	})
	// Before giving b's objects away the sharder took b's Lease, so b can
	// never renew it.
	l, err := e.kube.CoordinationV1().Leases("leases").Get(ctx, LeaseName("web", "b"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := *l.Spec.HolderIdentity; h == "b" || h == "" {
		t.Errorf("b's Lease holder after its objects moved = %q, want the sharder's tombstone", h)
	}
}

// TestSharderChildOfOwnerAssignedDuringScan: a scan lists the primaries,
// then the children. An owner drained by the scan, acknowledged and
// assigned to its new member before the scan reaches its children, must
// not leave them waiting for an assignment that already happened: they
// follow it, on c.
func TestSharderChildOfOwnerAssignedDuringScan(t *testing.T) {
	const n = 30
	var armed atomic.Bool
	listing, release := make(chan struct{}), make(chan struct{})
	e := startSharder(t, n, func(md metadata.Interface) metadata.Interface {
		return gatedMetadata{Interface: md, before: func(gvr schema.GroupVersionResource, opts metav1.ListOptions) {
			// The scan's list of the children, once armed: hold it.
			if gvr == cmGVR && opts.LabelSelector == ShardLabel("web") && armed.CompareAndSwap(true, false) {
				close(listing)
				<-release
			}
		}}
	})
	ctx := t.Context()
	armed.Store(true)
	e.renew("c")
	moving := joining(t, n)
	select {
	case <-listing:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the scan to list the children")
	}
	eventuallyT(t, "the widgets moving to c to be draining", e.draining(moving))
	e.acknowledge(ctx, moving)
	eventuallyT(t, "the acknowledged widgets on c", func() bool {
		for _, i := range moving {
			if owner, d := e.labels(widgetGVR, widget(i).Name); d || owner != "c" {
				return false
			}
		}
		return true
	})
	close(release)
	eventuallyT(t, "the children of the widgets moved to c, on c", e.settled("a", "b", "c"))
}

// gatedMetadata is a metadata client that calls before ahead of every
// List.
type gatedMetadata struct {
	metadata.Interface
	before func(schema.GroupVersionResource, metav1.ListOptions)
}

func (g gatedMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return gatedResource{Getter: g.Interface.Resource(gvr), before: func(opts metav1.ListOptions) { g.before(gvr, opts) }}
}

type gatedResource struct {
	metadata.Getter
	before func(metav1.ListOptions)
}

func (r gatedResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	r.before(opts)
	return r.Getter.List(ctx, opts)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
