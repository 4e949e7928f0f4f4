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
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

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
type labelSharderOptions struct {
	// Ring names the ring whose members share the objects.
	Ring string
	// Namespace holds the members' Leases (LeaseName).
	Namespace string
	// Kube watches the Leases, and buries those of dead members.
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
	Observe observer
}

// Observer receives what a Sharder does, for metrics.
type observer interface {
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
//
// A Sharder caches no labelled object: it lists and watches only the
// objects without a shard label (new ones, and those their last owner
// acknowledged), which are few once the ring is settled, and keeps of
// them only what it reads, in maps it gives back once they are empty.
// The labelled objects are read, a page at a time, by a scan when the
// live members change (and once more after a scan that queued work, once
// that work is done).
type labelSharder struct {
	opts    labelSharderOptions
	members *Members
	log     logr.Logger
	// shardLabel and drainLabel are the ring's ShardLabel and DrainLabel.
	shardLabel, drainLabel string

	mu   sync.Mutex
	ring Ring
	live []string
	// snaps are the objects as the last scan read them, for the items it
	// queued, until they are handled.
	snaps map[item]snap
	// waiting are the children, by their primary owner, to label before
	// it when it is assigned: children first, so that the new member's
	// first Reconcile of the owner finds them.
	waiting map[item][]item
	// assigned, while a scan runs (nil otherwise), are the primaries
	// whose waiting children were taken since it began: a child the scan
	// reads after its owner was assigned must not wait for it.
	assigned map[item]struct{}
	// followUp, when not zero, is when the next scan is due once the queue
	// has drained: the last one found work, and objects may have changed
	// while it was done.
	followUp time.Time

	slots  []slot // a resource of opts.Resources in one of its namespaces
	leases cache.SharedIndexInformer
	queue  *workqueue.Queue[item]
	scans  chan struct{} // a scan is wanted
}

// buriedHolder is the holder a sharder writes into the Lease of a member
// it found dead, before it gives that member's objects away.
const buriedHolder = "ctrlkit-sharder-buried"

// sharderWorkers is how many objects a sharder labels at once: a scale-up
// or a member's death moves 1/N of every object, one write each.
const sharderWorkers = 8

// scanPage is how many objects a scan reads per request.
const scanPage = 500

// slot is one sharded resource in one namespace ("" for all), and its
// unlabelled objects there.
type slot struct {
	res        Resource
	ns         string
	unlabelled *unlabelled
}

// item is one object to look at: its slot's index and its key.
type item struct {
	r               int
	namespace, name string
}

// NewSharder validates opts and returns a Sharder.
func newLabelSharder(opts labelSharderOptions) (*labelSharder, error) {
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
	return &labelSharder{opts: opts, members: NewMembers(opts.Ring, opts.Clock), log: opts.Logger, queue: q,
		shardLabel: ShardLabel(opts.Ring), drainLabel: DrainLabel(opts.Ring),
		snaps: map[item]snap{}, waiting: map[item][]item{}, scans: make(chan struct{}, 1)}, nil
}

// Start runs the sharder until ctx ends. It blocks.
func (s *labelSharder) Start(ctx context.Context) error {
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
			i := len(slots)
			slots = append(slots, slot{res: r, ns: ns, unlabelled: &unlabelled{snap: s.snapOf, added: func(key cache.ObjectName, sn snap) {
				// The selector already leaves labelled objects out; a
				// client that ignores it (a fake) must not make them look
				// new.
				if sn.shard == "" {
					s.queue.Add(item{r: i, namespace: key.Namespace, name: key.Name})
				}
			}}})
		}
	}
	s.slots = slots
	var wg sync.WaitGroup
	defer wg.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { leases.RunWithContext(runCtx) })
	synced := []cache.InformerSynced{leases.HasSynced}
	for _, sl := range slots {
		rc := resourceClient(s.opts.Metadata, sl.res.Resource, sl.ns)
		name := "sharder " + s.opts.Ring + ": unlabelled " + sl.res.Resource.GroupResource().String()
		wg.Go(func() { sl.unlabelled.run(runCtx, name, "!"+s.shardLabel, rc) })
		synced = append(synced, sl.unlabelled.hasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	s.wantScan() // objects labelled for members that are gone
	s.judge()
	for range sharderWorkers {
		wg.Go(func() {
			for s.process(runCtx) {
			}
		})
	}
	wg.Go(func() { s.scanLoop(runCtx) })
	t := s.opts.Clock.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.queue.ShutDown()
			return nil
		case <-t.C():
			s.judge()
			// Not while the work the last scan found is still queued: a
			// scan then would only read every object again to queue the
			// same ones.
			s.mu.Lock()
			due := !s.followUp.IsZero() && !s.opts.Clock.Now().Before(s.followUp) && s.queue.Len() == 0
			if due {
				s.followUp = time.Time{}
			}
			s.mu.Unlock()
			if due {
				s.wantScan()
			}
		}
	}
}

// snap is what the sharder reads of an object: what Decide and a
// conditional label patch need.
type snap struct {
	rv           string // the resourceVersion: its patches are conditional on it
	shard, drain string // the ring's labels, "" when absent
	owner        item   // its controlling owner, when hasOwner
	hasOwner     bool   // its controlling owner is of a primary resource the sharder watches
	deleting     bool   // it has a deletion timestamp
}

// snapOf returns what the sharder reads of m.
func (s *labelSharder) snapOf(m *metav1.PartialObjectMetadata) snap {
	sn := snap{rv: m.ResourceVersion, shard: m.Labels[s.shardLabel], drain: m.Labels[s.drainLabel],
		deleting: m.DeletionTimestamp != nil}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		sn.owner, sn.hasOwner = s.ownerItem(ref, m.Namespace)
	}
	return sn
}

// observe records a member Lease, and judges liveness again.
func (s *labelSharder) observe(obj any, deleted bool) {
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

// judge rebuilds the ring when the live members changed, and then asks
// for a scan of every object.
func (s *labelSharder) judge() {
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
	s.wantScan()
	// The unlabelled objects are not scanned: their items are handled
	// with the ring of the moment they are handled.
}

func (s *labelSharder) wantScan() {
	select {
	case s.scans <- struct{}{}:
	default:
	}
}

// scanLoop scans whenever a scan is wanted, until ctx ends.
func (s *labelSharder) scanLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.scans:
		}
		found, err := s.scan(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Error(err, "Could not scan the ring's objects; retrying", "ring", s.opts.Ring)
			found = true
		}
		if found {
			s.mu.Lock()
			s.followUp = s.opts.Clock.Now().Add(5 * s.opts.Interval)
			s.mu.Unlock()
		}
	}
}

// scan reads every labelled object of the ring, a page at a time, and
// queues those that must move: primaries first, so that the children of
// a moving primary wait for it (waiting) rather than move before it is
// handed over. It reports whether it queued any.
func (s *labelSharder) scan(ctx context.Context) (bool, error) {
	s.mu.Lock()
	ring := s.ring
	s.waiting = map[item][]item{} // not clear: that keeps the buckets
	s.assigned = map[item]struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.assigned = nil
		s.mu.Unlock()
	}()
	moving := map[item]bool{}
	found := false
	// queue queues it with the object as read.
	queue := func(it item, sn snap) {
		found = true
		s.keepSnap(it, sn)
		s.queue.Add(it)
	}
	for _, primaries := range []bool{true, false} {
		for i, sl := range s.slots {
			if sl.res.Primary != primaries {
				continue
			}
			err := s.list(ctx, i, func(it item, sn snap) {
				current, draining := sn.shard, sn.drain != ""
				if primaries {
					desired := ring.Owner(ringKey(it.namespace, it.name))
					switch decideAction(current, draining, desired, s.members.Alive) {
					case Keep:
						return
					case Wait:
						// Its owner's acknowledgement makes it unlabelled,
						// which the watch of unlabelled objects sees: no
						// scan needs to look again.
						moving[it] = true
						return
					}
					moving[it] = true
					queue(it, sn)
					return
				}
				if !sn.hasOwner {
					if desired := ring.Owner(ringKey(it.namespace, it.name)); current != desired || draining || !s.members.Alive(current) {
						queue(it, sn)
					}
					return
				}
				owner := sn.owner
				desired := ring.Owner(ringKey(owner.namespace, owner.name))
				if current == desired && !draining {
					return
				}
				if moving[owner] && s.wait(owner, it, &sn) {
					return // labelled when its owner is assigned
				}
				queue(it, sn)
			})
			if err != nil {
				return found, err
			}
		}
	}
	return found, nil
}

// keepSnap records the object as read for it, until it is handled.
func (s *labelSharder) keepSnap(it item, sn snap) {
	s.mu.Lock()
	s.snaps[it] = sn
	s.mu.Unlock()
}

// wait records child it, as read (sn, when not nil), to be labelled when
// owner is assigned. It reports false, and records nothing, when owner
// was assigned since the running scan began: the child must be queued.
func (s *labelSharder) wait(owner, it item, sn *snap) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.assigned[owner]; ok {
		return false
	}
	if sn != nil {
		s.snaps[it] = *sn
	}
	if !slices.Contains(s.waiting[owner], it) {
		s.waiting[owner] = append(s.waiting[owner], it)
	}
	return true
}

// process handles one item; false once the queue shut down.
func (s *labelSharder) process(ctx context.Context) bool {
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

// fetch returns the object of it: as the last scan read it, or as the
// store of unlabelled objects holds it, or else as the API server has
// it now; false when it is gone.
func (s *labelSharder) fetch(ctx context.Context, it item) (snap, bool, error) {
	s.mu.Lock()
	sn, ok := s.snaps[it]
	s.mu.Unlock()
	if ok {
		return sn, true, nil
	}
	sl := s.slots[it.r]
	if sn, ok := sl.unlabelled.get(it.namespace, it.name); ok && sn.shard == "" {
		return sn, true, nil
	}
	m, err := resourceClient(s.opts.Metadata, sl.res.Resource, it.namespace).Get(ctx, it.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return snap{}, false, nil
	} else if err != nil {
		return snap{}, false, err
	}
	return s.snapOf(m), true, nil
}

// forget drops what is known of it once handled, or found stale.
func (s *labelSharder) forget(it item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.snaps[it]; !ok {
		return
	}
	delete(s.snaps, it)
	if len(s.snaps) == 0 {
		// A Go map keeps its buckets when emptied: after a scan that moved
		// thousands of objects, give them back.
		s.snaps = map[item]snap{}
	}
}

// handle labels one object as Decide says, its children first.
func (s *labelSharder) handle(ctx context.Context, it item) error {
	obj, ok, err := s.fetch(ctx, it)
	if err != nil {
		return err
	}
	if !ok || obj.deleting {
		s.forget(it)
		return nil
	}
	err = s.decide(ctx, it, obj)
	if err == nil || apierrors.IsConflict(err) {
		s.forget(it) // a conflict: read it again on the retry
	}
	return err
}

func (s *labelSharder) decide(ctx context.Context, it item, obj snap) error {
	current, draining := obj.shard, obj.drain != ""
	s.mu.Lock()
	ring := s.ring
	s.mu.Unlock()
	if !s.slots[it.r].res.Primary {
		want, ok, err := s.childTarget(ctx, it, obj, ring)
		if err != nil || !ok || (want == current && !draining) {
			return err
		}
		return s.label(ctx, it, obj, want)
	}
	desired := ring.Owner(ringKey(it.namespace, it.name))
	switch decideAction(current, draining, desired, s.members.Alive) {
	case Assign:
		if current != "" {
			// Its owner looks dead: make it so before taking its objects.
			if err := s.bury(ctx, current); err != nil {
				return err
			}
		}
		if err := s.assignChildren(ctx, it, desired); err != nil {
			return err
		}
		if err := s.label(ctx, it, obj, desired); err != nil {
			return err
		}
		s.observed(Assign)
	case Drain:
		if err := s.patch(ctx, it, labelPatch(obj.rv, s.drainLabel, "true", "")); err != nil {
			return err
		}
		s.observed(Drain)
	}
	return nil
}

// assignChildren labels the children waiting for primary it for member.
// Those it could not label wait again.
func (s *labelSharder) assignChildren(ctx context.Context, it item, member string) error {
	s.mu.Lock()
	children, ok := s.waiting[it]
	delete(s.waiting, it)
	if s.assigned != nil {
		s.assigned[it] = struct{}{}
	}
	if ok && len(s.waiting) == 0 {
		s.waiting = map[item][]item{} // give the buckets back
	}
	s.mu.Unlock()
	for i, c := range children {
		err := s.assignChild(ctx, c, member)
		if err != nil {
			s.mu.Lock()
			s.waiting[it] = append(s.waiting[it], children[i:]...)
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

func (s *labelSharder) assignChild(ctx context.Context, c item, member string) error {
	obj, ok, err := s.fetch(ctx, c)
	if err != nil || !ok {
		return err
	}
	if obj.shard == member && obj.drain == "" {
		s.forget(c)
		return nil
	}
	err = s.label(ctx, c, obj, member)
	if err == nil || apierrors.IsConflict(err) {
		s.forget(c)
	}
	return err
}

// childTarget returns the member a non-primary object belongs to: its
// primary owner's, once the owner is settled (ok false until then: it
// waits for the owner, and is looked at again), or the ring's for its own
// key when it has no primary owner, or for its owner's key when the owner
// is gone.
func (s *labelSharder) childTarget(ctx context.Context, it item, obj snap, ring Ring) (string, bool, error) {
	if !obj.hasOwner {
		return ring.Owner(ringKey(it.namespace, it.name)), true, nil
	}
	owner := obj.owner
	o, ok, err := s.fetch(ctx, owner)
	if err != nil {
		return "", false, err
	}
	if !ok {
		return ring.Owner(ringKey(owner.namespace, owner.name)), true, nil
	}
	want := o.shard
	if want == "" || o.drain != "" || !s.members.Alive(want) {
		// Wait for the owner's assignment; look again in a while, in case
		// it was assigned before this child was recorded.
		if !s.wait(owner, it, nil) {
			// The owner was assigned meanwhile: look again soon (its label
			// may not be read yet).
			s.queue.AddRateLimited(it)
			return "", false, nil
		}
		s.queue.AddAfter(it, s.opts.Interval)
		return "", false, nil
	}
	return want, true, nil
}

// ownerItem returns the item of ref, the controlling owner of an object
// in namespace, when it is of a primary resource the sharder watches
// there.
func (s *labelSharder) ownerItem(ref *metav1.OwnerReference, namespace string) (item, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return item{}, false
	}
	for i, sl := range s.slots {
		if sl.res.Primary && sl.res.Kind == (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) && (sl.ns == "" || sl.ns == namespace) {
			return item{r: i, namespace: namespace, name: ref.Name}, true
		}
	}
	return item{}, false
}

// ringKey is the ring's key of an object.
func ringKey(namespace, name string) string { return namespace + "/" + name }

// bury takes the Lease of member, whose objects the sharder is about to
// give away because the Lease looks expired (see buryMember).
func (s *labelSharder) bury(ctx context.Context, member string) error {
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
	// A merge patch of the holder alone, conditional on the
	// resourceVersion seen: the rest of the Lease stays as it is.
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": l.ResourceVersion},
		"spec":     map[string]any{"holderIdentity": buriedHolder},
	})
	if err != nil {
		return err
	}
	if _, err := kube.CoordinationV1().Leases(l.Namespace).Patch(ctx, l.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: sharderFieldManager}); err != nil {
		return fmt.Errorf("burying the Lease of member %s: %w", member, err)
	}
	log.Info("A member's Lease expired: buried it before giving its objects away", "ring", ring, "member", member)
	return nil
}

func (s *labelSharder) observed(a Action) {
	if s.opts.Observe != nil {
		s.opts.Observe.Labelled(a)
	}
}

// label assigns obj, the object of it, to member, clearing any drain
// label.
func (s *labelSharder) label(ctx context.Context, it item, obj snap, member string) error {
	return s.patch(ctx, it, labelPatch(obj.rv, s.shardLabel, member, s.drainLabel))
}

// patch applies body, a labelPatch, to the object of it. The patch is
// conditional on the resourceVersion the sharder read, so that no
// decision is taken on an object someone else changed meanwhile.
func (s *labelSharder) patch(ctx context.Context, it item, body []byte) error {
	_, err := resourceClient(s.opts.Metadata, s.slots[it.r].res.Resource, it.namespace).
		Patch(ctx, it.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: sharderFieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// sharderFieldManager is the field manager of the sharder's writes.
const sharderFieldManager = "ctrlkit-sharder"

// labelPatch is the JSON merge patch that sets label key to value and
// removes label remove (none when ""), on the condition that the object's
// resourceVersion is still rv.
func labelPatch(rv, key, value, remove string) []byte {
	labels := map[string]any{key: value}
	if remove != "" {
		labels[remove] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "labels": labels}}) // cannot fail: strings only
	return b
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
