package shard

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestScanCountsOnlyQueuedWork: a scan that finds only objects waiting
// for their owner's acknowledgement of a drain, and children waiting for
// such an owner, reports no work, so no follow-up scan reads the ring
// again while the acknowledgements are pending (the acknowledgement makes
// the object unlabelled, which the watch of unlabelled objects sees); a
// scan that queues an object reports it.
func TestScanCountsOnlyQueuedWork(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"}
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	labels := func(member string, draining bool) map[string]string {
		l := map[string]string{ShardLabel("web"): member}
		if draining {
			l[DrainLabel("web")] = "true"
		}
		return l
	}
	widget := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "test.ctrlkit.io/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "uid-w", Labels: labels("a", true)}}
	child := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-cm", Labels: labels("a", false), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "test.ctrlkit.io/v1", Kind: "Widget", Name: "w", UID: "uid-w", Controller: new(true)}}}}
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	md := metadatafake.NewSimpleMetadataClient(scheme, widget, child)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := newLabelSharder(labelSharderOptions{Ring: "web", Namespace: "leases", Kube: kubefake.NewClientset(), Metadata: md, Clock: clk,
		Resources: []Resource{{Resource: gvr, Kind: schema.GroupKind{Group: "test.ctrlkit.io", Kind: "Widget"}, Primary: true},
			{Resource: cmGVR, Kind: schema.GroupKind{Kind: "ConfigMap"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.queue.ShutDown()
	for _, m := range []string{"a", "b"} {
		s.members.Observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leases", Name: LeaseName("web", m), ResourceVersion: "1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new(m), LeaseDurationSeconds: new(int32(15))}})
	}
	s.judge()
	for _, r := range s.opts.Resources {
		s.slots = append(s.slots, slot{res: r, unlabelled: &unlabelled{snap: s.snapOf, added: func(cache.ObjectName, snap) {}}})
	}

	found, err := s.scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if found || s.queue.Len() != 0 {
		t.Errorf("a scan that found a drain under way and its waiting child: work %v, %d queued; want none", found, s.queue.Len())
	}
	if got := s.waiting[item{r: 0, namespace: "ns", name: "w"}]; len(got) != 1 || got[0].name != "w-cm" {
		t.Errorf("children waiting for w: %v, want w-cm", got)
	}

	// Labelled for a member that is not alive, the widget is work: the
	// scan queues it.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"z",%q:null}}}`, ShardLabel("web"), DrainLabel("web"))
	if _, err := md.Resource(gvr).Namespace("ns").Patch(t.Context(), "w", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	found, err = s.scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !found || s.queue.Len() == 0 {
		t.Errorf("a scan that found a widget of a dead member: work %v, %d queued; want it queued", found, s.queue.Len())
	}
}

// TestScanQueuesEveryMove: a scan queues every object that must move,
// each once.
func TestScanQueuesEveryMove(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"}
	const n = 300
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "test.ctrlkit.io/v1", Kind: "Widget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("w%03d", i), Labels: map[string]string{ShardLabel("web"): "gone"}}})
	}
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	s, err := newLabelSharder(labelSharderOptions{Ring: "web", Namespace: "leases", Kube: kubefake.NewClientset(),
		Metadata: metadatafake.NewSimpleMetadataClient(scheme, objs...), Clock: clocktesting.NewFakeClock(time.Unix(1000, 0)),
		Resources: []Resource{{Resource: gvr, Kind: schema.GroupKind{Group: "test.ctrlkit.io", Kind: "Widget"}, Primary: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.queue.ShutDown()
	for _, m := range []string{"a", "b", "c"} {
		s.members.Observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leases", Name: LeaseName("web", m), ResourceVersion: "1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new(m), LeaseDurationSeconds: new(int32(15))}})
	}
	s.judge()
	s.slots = []slot{{res: s.opts.Resources[0], unlabelled: &unlabelled{snap: s.snapOf, added: func(cache.ObjectName, snap) {}}}}
	found, err := s.scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Error("a scan of objects labelled for a dead member reported no work")
	}
	seen := map[string]bool{}
	for s.queue.Len() > 0 {
		it, _ := s.queue.Get()
		s.queue.Done(it)
		if seen[it.name] {
			t.Errorf("%s queued twice", it.name)
		}
		seen[it.name] = true
	}
	if len(seen) != n {
		t.Fatalf("queued %d distinct objects, want %d", len(seen), n)
	}
}
