package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// Resource is a sharded resource.
type Resource struct {
	// Resource is what is listed, watched and labelled.
	Resource schema.GroupVersionResource
	// Kind is the resource's kind, for owner references.
	Kind schema.GroupKind
	// Primary resources are assigned by their own namespace/name. The
	// others follow their controlling owner when it is of a primary kind
	// (a Deployment of a Website lives with the Website), and are assigned
	// like primaries when it is not.
	Primary bool
	// Namespaces are the namespaces whose objects are sharded, those the
	// members cache; empty means every namespace. Objects elsewhere are
	// not the ring's: the sharder neither watches nor labels them.
	Namespaces []string
}

// SharderOptions configure a Sharder.
type SharderOptions struct {
	// Ring names the ring whose members share the objects.
	Ring string
	// Namespace holds the members' Leases (LeaseName).
	Namespace string
	// Kube watches the Leases.
	Kube kubernetes.Interface
	// Metadata lists, watches and labels the objects, metadata only.
	Metadata metadata.Interface
	// Resources are the sharded resources; at least one primary.
	Resources []Resource
	// Interval is how often liveness is judged again, for Leases that
	// expire without an event. 0 means 2s.
	Interval time.Duration
	// Clock is the clock Leases are judged by; nil means the real one.
	Clock clock.WithTicker
	// Logger receives a line for every change of the live members, and
	// errors.
	Logger logr.Logger
	// Observe, when set, is told of every change of the live members and
	// of every label the sharder writes; a manager feeds its metrics with
	// it. It must not block.
	Observe Observer
}

// Observer receives what a Sharder does, for metrics.
type Observer interface {
	// Members is called with the live members whenever they change.
	Members(live []string)
	// Labelled is called after each label write: Assign or Drain.
	Labelled(a Action)
}

// Sharder assigns every object of the sharded resources to a member of
// the ring by labelling it (ShardLabel), following Decide: it only ever
// labels an object that nobody may be reconciling (unlabelled, or whose
// owner is dead), and asks a live owner to hand an object over with
// DrainLabel. One Sharder runs per ring, on the replica that holds the
// sharder's Lease. Create it with NewSharder.
type Sharder struct {
	opts    SharderOptions
	members *Members
	log     logr.Logger

	mu   sync.Mutex
	ring Ring
	live []string

	slots  []slot // a resource of opts.Resources in one of its namespaces
	leases cache.SharedIndexInformer
	queue  *workqueue.Queue[item]
}

// buriedHolder is the holder a sharder writes into the Lease of a member
// it found dead, before it gives that member's objects away.
const buriedHolder = "ctrlkit-sharder-buried"

// slot is the informer of one sharded resource in one namespace ("" for
// all).
type slot struct {
	res Resource
	inf cache.SharedIndexInformer
}

// item is one object to look at: its slot's index and its key.
type item struct {
	r               int
	namespace, name string
}

// NewSharder validates opts and returns a Sharder.
func NewSharder(opts SharderOptions) (*Sharder, error) {
	switch {
	case opts.Ring == "":
		return nil, errors.New("shard: SharderOptions.Ring is empty: name the ring")
	case opts.Namespace == "":
		return nil, errors.New("shard: SharderOptions.Namespace is empty: name the namespace of the members' Leases")
	case opts.Kube == nil || opts.Metadata == nil:
		return nil, errors.New("shard: SharderOptions.Kube and Metadata are required")
	case !slices.ContainsFunc(opts.Resources, func(r Resource) bool { return r.Primary }):
		return nil, errors.New("shard: SharderOptions.Resources has no primary resource: mark the resource each controller reconciles Primary")
	case opts.Interval < 0:
		return nil, fmt.Errorf("shard: SharderOptions.Interval is %v: use 0 for 2s, or a positive period", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	q, err := workqueue.New(workqueue.Options[item]{Name: "shard-" + opts.Ring})
	if err != nil {
		return nil, err
	}
	return &Sharder{opts: opts, members: NewMembers(opts.Ring, opts.Clock), log: opts.Logger, queue: q}, nil
}

// Start runs the sharder until ctx ends. It blocks.
func (s *Sharder) Start(ctx context.Context) error {
	defer s.queue.ShutDown()
	leases := informers.NewSharedInformerFactoryWithOptions(s.opts.Kube, 0, informers.WithNamespace(s.opts.Namespace)).
		Coordination().V1().Leases().Informer()
	s.leases = leases
	if _, err := leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj, false) },
		UpdateFunc: func(_, obj any) { s.observe(obj, false) },
		DeleteFunc: func(obj any) { s.observe(obj, true) },
	}); err != nil {
		return err
	}
	var slots []slot
	for _, r := range s.opts.Resources {
		nss := r.Namespaces
		if len(nss) == 0 {
			nss = []string{metav1.NamespaceAll}
		}
		for _, ns := range nss {
			slots = append(slots, slot{res: r})
			slots[len(slots)-1].inf = s.newInformer(r, ns)
		}
	}
	for i, sl := range slots {
		if _, err := sl.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.enqueue(i, obj) },
			UpdateFunc: func(_, obj any) { s.enqueue(i, obj) },
		}); err != nil {
			return err
		}
	}
	s.slots = slots
	infs := []cache.SharedIndexInformer{leases}
	for _, sl := range slots {
		infs = append(infs, sl.inf)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, inf := range infs {
		wg.Go(func() { inf.RunWithContext(runCtx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced(infs)...) {
		return ctx.Err()
	}
	s.judge()
	wg.Go(func() {
		for s.process(runCtx) {
		}
	})
	t := s.opts.Clock.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.queue.ShutDown()
			return nil
		case <-t.C():
			s.judge()
		}
	}
}

// newInformer returns an informer, not started, of the metadata of r's
// objects in namespace ns, indexed by controlling owner.
func (s *Sharder) newInformer(r Resource, ns string) cache.SharedIndexInformer {
	return metadatainformer.NewFilteredMetadataInformer(s.opts.Metadata, r.Resource, ns, 0,
		cache.Indexers{informer.ControllerIndex: func(obj any) ([]string, error) {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return nil, nil
			}
			return informer.IndexByControllerOwner(m), nil
		}}, nil).Informer()
}

func synced(infs []cache.SharedIndexInformer) []cache.InformerSynced {
	out := make([]cache.InformerSynced, len(infs))
	for i, inf := range infs {
		out[i] = inf.HasSynced
	}
	return out
}

// observe records a member Lease, and judges liveness again.
func (s *Sharder) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	member, ok := s.members.Observe(l)
	if !ok {
		return
	}
	if deleted {
		s.members.Forget(member)
	}
	s.judge()
}

// judge rebuilds the ring when the live members changed, and then looks
// at every object again.
func (s *Sharder) judge() {
	live := s.members.Live()
	s.mu.Lock()
	changed := !slices.Equal(live, s.live)
	if changed {
		s.live, s.ring = live, NewRing(live...)
	}
	s.mu.Unlock()
	if !changed || s.slots == nil {
		return
	}
	s.log.Info("Ring members changed", "ring", s.opts.Ring, "members", live)
	if s.opts.Observe != nil {
		s.opts.Observe.Members(live)
	}
	for i, sl := range s.slots {
		for _, obj := range sl.inf.GetStore().List() {
			s.enqueue(i, obj)
		}
	}
}

func (s *Sharder) enqueue(r int, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	s.queue.Add(item{r: r, namespace: m.Namespace, name: m.Name})
}

// process handles one item; false once the queue shut down.
func (s *Sharder) process(ctx context.Context) bool {
	it, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(it)
	if err := s.handle(ctx, it); err != nil {
		if ctx.Err() == nil {
			s.log.V(1).Info("Retrying the assignment of an object", "namespace", it.namespace, "name", it.name, "err", err.Error())
		}
		s.queue.AddRateLimited(it)
		return true
	}
	s.queue.Forget(it)
	return true
}

func (s *Sharder) get(r int, namespace, name string) *metav1.PartialObjectMetadata {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := s.slots[r].inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

// handle labels one object as Decide says.
func (s *Sharder) handle(ctx context.Context, it item) error {
	obj := s.get(it.r, it.namespace, it.name)
	if obj == nil || obj.DeletionTimestamp != nil {
		return nil
	}
	shardLabel, drainLabel := ShardLabel(s.opts.Ring), DrainLabel(s.opts.Ring)
	current, draining := obj.Labels[shardLabel], obj.Labels[drainLabel] != ""
	if owner := s.primaryOwner(it.r, obj); owner != nil {
		// A child follows its owner once the owner is settled.
		want := owner.Labels[shardLabel]
		if want == "" || owner.Labels[drainLabel] != "" || (want == current && !draining) {
			return nil
		}
		return s.label(ctx, it.r, obj, want)
	}
	s.mu.Lock()
	desired := s.ring.Owner(obj.Namespace + "/" + obj.Name)
	s.mu.Unlock()
	switch Decide(current, draining, desired, s.members.Alive) {
	case Assign:
		if current != "" {
			// Its owner looks dead: make it so before taking its objects.
			if err := s.bury(ctx, current); err != nil {
				return err
			}
		}
		if s.slots[it.r].res.Primary {
			// Children first: the new owner's first Reconcile finds them.
			for c, sl := range s.slots {
				children, _ := sl.inf.GetIndexer().ByIndex(informer.ControllerIndex, informer.ControllerKey(s.slots[it.r].res.Kind, obj.Namespace, obj.Name))
				for _, child := range children {
					if m, ok := child.(*metav1.PartialObjectMetadata); ok && m.Labels[shardLabel] != desired {
						if err := s.label(ctx, c, m, desired); err != nil {
							return err
						}
					}
				}
			}
		}
		if err := s.label(ctx, it.r, obj, desired); err != nil {
			return err
		}
		s.observed(Assign)
	case Drain:
		if err := s.patch(ctx, it.r, obj, map[string]any{drainLabel: "true"}); err != nil {
			return err
		}
		s.observed(Drain)
	}
	return nil
}

// bury takes the Lease of member, whose objects the sharder is about to
// give away because the Lease looks expired (see buryMember).
func (s *Sharder) bury(ctx context.Context, member string) error {
	return buryMember(ctx, s.opts.Kube, s.leases.GetStore(), s.opts.Namespace, s.opts.Ring, member, s.log)
}

// buryMember takes the Lease of member, found in leases (an informer's
// store of the namespace's Leases), on the condition that the Lease has
// not changed since it was last seen there (its resourceVersion). A
// sharder or coordinator whose watch of the Leases lags would otherwise
// take a member that kept renewing for dead: the update then conflicts,
// and whatever waited on the burial waits. Once buried, the member can
// never renew: its elector sees another holder and it stops. A Lease
// already released or buried, or deleted, needs nothing.
func buryMember(ctx context.Context, kube kubernetes.Interface, leases cache.Store, namespace, ring, member string, log logr.Logger) error {
	obj, ok, err := leases.GetByKey(namespace + "/" + LeaseName(ring, member))
	if err != nil || !ok {
		return err
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != member {
		return nil
	}
	l = l.DeepCopy()
	holder := buriedHolder
	l.Spec.HolderIdentity = &holder
	if _, err := kube.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: "ctrlkit-sharder"}); err != nil {
		return fmt.Errorf("burying the Lease of member %s: %w", member, err)
	}
	log.Info("A member's Lease expired: buried it before giving its objects away", "ring", ring, "member", member)
	return nil
}

func (s *Sharder) observed(a Action) {
	if s.opts.Observe != nil {
		s.opts.Observe.Labelled(a)
	}
}

// primaryOwner returns obj's controlling owner when it is an object of a
// primary resource in the cache.
func (s *Sharder) primaryOwner(r int, obj *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	if s.slots[r].res.Primary {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	for i, sl := range s.slots {
		if sl.res.Primary && sl.res.Kind == (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
			if o := s.get(i, obj.Namespace, ref.Name); o != nil {
				return o
			}
		}
	}
	return nil
}

// label assigns obj to member, clearing any drain label.
func (s *Sharder) label(ctx context.Context, r int, obj *metav1.PartialObjectMetadata, member string) error {
	return s.patch(ctx, r, obj, map[string]any{ShardLabel(s.opts.Ring): member, DrainLabel(s.opts.Ring): nil})
}

// patch merges labels into obj's, on the condition that obj has not
// changed since it was read (its resourceVersion), so that no decision is
// taken on an object someone else changed meanwhile.
func (s *Sharder) patch(ctx context.Context, r int, obj *metav1.PartialObjectMetadata, labels map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": obj.ResourceVersion, "labels": labels}})
	if err != nil {
		return err
	}
	_, err = resourceClient(s.opts.Metadata, s.slots[r].res.Resource, obj.Namespace).
		Patch(ctx, obj.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "ctrlkit-sharder"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// resourceClient is md's client of resource gvr in namespace (empty for
// cluster-scoped objects).
func resourceClient(md metadata.Interface, gvr schema.GroupVersionResource, namespace string) metadata.ResourceInterface {
	res := md.Resource(gvr)
	if namespace == "" {
		return res
	}
	return res.Namespace(namespace)
}

// Acknowledge is a member's answer to a drain: it removes the shard and
// drain labels of ring from the object namespace/name of resource gvr, on
// the condition that the object is still labelled for member (a JSON
// patch test), through md with fieldManager. Call it only once the member
// has stopped reconciling the object (reconcile.Controller.Exclude): the
// sharder then gives it to its new member.
func Acknowledge(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, namespace, name, ring, member, fieldManager string) error {
	esc := strings.NewReplacer("~", "~0", "/", "~1").Replace // JSON pointer
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/labels/" + esc(ShardLabel(ring)), "value": member},
		{"op": "remove", "path": "/metadata/labels/" + esc(ShardLabel(ring))},
		{"op": "remove", "path": "/metadata/labels/" + esc(DrainLabel(ring))},
	})
	if err != nil {
		return err
	}
	_, err = resourceClient(md, gvr, namespace).Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}
