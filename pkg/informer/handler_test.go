package informer_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

var deployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// owned returns object metadata in ns with the given owner references.
func owned(ns, name string, refs ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs}
}

func ref(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name), Controller: &controller}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestMapFuncs(t *testing.T) {
	tests := []struct {
		name string
		mapf informer.MapFunc
		obj  metav1.Object
		want []types.NamespacedName
	}{
		{
			name: "ObjectKey namespaced",
			mapf: informer.ObjectKey(),
			obj:  owned("default", "a"),
			want: []types.NamespacedName{key("default", "a")},
		},
		{
			name: "ObjectKey cluster-scoped",
			mapf: informer.ObjectKey(),
			obj:  owned("", "node-1"),
			want: []types.NamespacedName{key("", "node-1")},
		},
		{
			name: "OwnerKey controller of matching kind maps to owner in child's namespace",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("apps/v1", "Deployment", "web", true)),
			want: []types.NamespacedName{key("team-a", "web")},
		},
		{
			name: "OwnerKey picks the controller among several refs",
			mapf: informer.OwnerKey(deployment),
			obj: owned("team-a", "web-cm",
				ref("apps/v1", "Deployment", "not-controller", false),
				ref("apps/v1", "Deployment", "web", true)),
			want: []types.NamespacedName{key("team-a", "web")},
		},
		{
			name: "OwnerKey ignores a non-controller ref of matching kind",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("apps/v1", "Deployment", "web", false)),
		},
		{
			name: "OwnerKey ignores a ref with Controller unset",
			mapf: informer.OwnerKey(deployment),
			obj: owned("team-a", "web-cm", metav1.OwnerReference{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web",
			}),
		},
		{
			name: "OwnerKey ignores a controller of another kind",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("apps/v1", "ReplicaSet", "web-123", true)),
		},
		{
			name: "OwnerKey ignores a controller of the same kind in another group",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("example.com/v1", "Deployment", "web", true)),
		},
		{
			name: "OwnerKey ignores a core-group controller for an apps owner",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("v1", "Deployment", "web", true)),
		},
		{
			name: "OwnerKey of any version of the group",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("apps/v1beta2", "Deployment", "web", true)),
			want: []types.NamespacedName{key("team-a", "web")},
		},
		{
			name: "OwnerKey ignores an unparsable apiVersion",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm", ref("apps/v1/extra", "Deployment", "web", true)),
		},
		{
			name: "OwnerKey without owner references",
			mapf: informer.OwnerKey(deployment),
			obj:  owned("team-a", "web-cm"),
		},
		{
			name: "ClusterOwnerKey maps to an owner key without namespace",
			mapf: informer.ClusterOwnerKey(schema.GroupKind{Kind: "Namespace"}),
			obj:  owned("team-a", "quota", ref("v1", "Namespace", "team-a", true)),
			want: []types.NamespacedName{key("", "team-a")},
		},
		{
			name: "ClusterOwnerKey ignores a non-controller ref",
			mapf: informer.ClusterOwnerKey(schema.GroupKind{Kind: "Namespace"}),
			obj:  owned("team-a", "quota", ref("v1", "Namespace", "team-a", false)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.mapf(tt.obj)
			if !slices.Equal(got, tt.want) {
				t.Errorf("keys = %v, want %v", got, tt.want)
			}
		})
	}
}

// enqueued is one call of an informer.Enqueue.
type enqueued struct {
	key     types.NamespacedName
	typ     informer.EventType
	initial bool
	obj     string // name of ev.Object
	old     string // name of ev.Old, "" when nil
}

func record(got *[]enqueued) informer.Enqueue {
	return func(k types.NamespacedName, ev informer.Event) {
		e := enqueued{key: k, typ: ev.Type, initial: ev.InitialList, obj: ev.Object.GetName()}
		if ev.Old != nil {
			e.old = ev.Old.GetName()
		}
		*got = append(*got, e)
	}
}

// labelled returns object metadata with the label "owner" set.
func labelled(ns, name, owner string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"owner": owner}}
}

// byOwnerLabel maps an object to the key named by its "owner" label.
func byOwnerLabel(obj metav1.Object) []types.NamespacedName {
	if o, ok := obj.GetLabels()["owner"]; ok {
		return []types.NamespacedName{key(obj.GetNamespace(), o)}
	}
	return nil
}

func TestHandlerResourceEventHandler(t *testing.T) {
	a := owned("default", "a")
	aNew := owned("default", "a")
	aNew.ResourceVersion = "2"
	tests := []struct {
		name    string
		handler informer.Handler
		deliver func(h cache.ResourceEventHandler)
		want    []enqueued
	}{
		{
			name:    "add from the initial list maps through ObjectKey by default",
			deliver: func(h cache.ResourceEventHandler) { h.OnAdd(a, true) },
			want:    []enqueued{{key: key("default", "a"), typ: informer.Added, initial: true, obj: "a"}},
		},
		{
			name:    "add after the initial list",
			deliver: func(h cache.ResourceEventHandler) { h.OnAdd(a, false) },
			want:    []enqueued{{key: key("default", "a"), typ: informer.Added, obj: "a"}},
		},
		{
			name:    "update with the same key for old and new enqueues it once",
			deliver: func(h cache.ResourceEventHandler) { h.OnUpdate(a, aNew) },
			want:    []enqueued{{key: key("default", "a"), typ: informer.Updated, obj: "a", old: "a"}},
		},
		{
			name:    "update maps both old and new objects, new first",
			handler: informer.Handler{Map: byOwnerLabel},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnUpdate(labelled("ns", "child", "old-owner"), labelled("ns", "child", "new-owner"))
			},
			want: []enqueued{
				{key: key("ns", "new-owner"), typ: informer.Updated, obj: "child", old: "child"},
				{key: key("ns", "old-owner"), typ: informer.Updated, obj: "child", old: "child"},
			},
		},
		{
			name:    "update when only the old object maps to a key",
			handler: informer.Handler{Map: byOwnerLabel},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnUpdate(labelled("ns", "child", "old-owner"), owned("ns", "child"))
			},
			want: []enqueued{{key: key("ns", "old-owner"), typ: informer.Updated, obj: "child", old: "child"}},
		},
		{
			name:    "update of a child moving between controlling owners reaches both through OwnerKey",
			handler: informer.Handler{Map: informer.OwnerKey(deployment)},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnUpdate(
					owned("ns", "child", ref("apps/v1", "Deployment", "first", true)),
					owned("ns", "child", ref("apps/v1", "Deployment", "second", true)))
			},
			want: []enqueued{
				{key: key("ns", "second"), typ: informer.Updated, obj: "child", old: "child"},
				{key: key("ns", "first"), typ: informer.Updated, obj: "child", old: "child"},
			},
		},
		{
			name:    "add through ClusterOwnerKey",
			handler: informer.Handler{Map: informer.ClusterOwnerKey(schema.GroupKind{Kind: "Namespace"})},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnAdd(owned("team-a", "quota", ref("v1", "Namespace", "team-a", true)), false)
			},
			want: []enqueued{{key: key("", "team-a"), typ: informer.Added, obj: "quota"}},
		},
		{
			name: "a MapFunc returning several keys enqueues each",
			handler: informer.Handler{Map: func(obj metav1.Object) []types.NamespacedName {
				return []types.NamespacedName{key("x", obj.GetName()), key("y", obj.GetName())}
			}},
			deliver: func(h cache.ResourceEventHandler) { h.OnAdd(a, false) },
			want: []enqueued{
				{key: key("x", "a"), typ: informer.Added, obj: "a"},
				{key: key("y", "a"), typ: informer.Added, obj: "a"},
			},
		},
		{
			name: "update deduplicates across several keys of old and new",
			handler: informer.Handler{Map: func(obj metav1.Object) []types.NamespacedName {
				return []types.NamespacedName{key("x", "shared"), key("x", obj.GetResourceVersion())}
			}},
			deliver: func(h cache.ResourceEventHandler) { h.OnUpdate(a, aNew) },
			want: []enqueued{
				{key: key("x", "shared"), typ: informer.Updated, obj: "a", old: "a"},
				{key: key("x", "2"), typ: informer.Updated, obj: "a", old: "a"},
				{key: key("x", ""), typ: informer.Updated, obj: "a", old: "a"},
			},
		},
		{
			name:    "a MapFunc returning nothing enqueues nothing",
			handler: informer.Handler{Map: func(metav1.Object) []types.NamespacedName { return nil }},
			deliver: func(h cache.ResourceEventHandler) { h.OnAdd(a, false) },
		},
		{
			name:    "delete",
			deliver: func(h cache.ResourceEventHandler) { h.OnDelete(a) },
			want:    []enqueued{{key: key("default", "a"), typ: informer.Deleted, obj: "a"}},
		},
		{
			name: "delete wrapped in a tombstone is unwrapped",
			deliver: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: a})
			},
			want: []enqueued{{key: key("default", "a"), typ: informer.Deleted, obj: "a"}},
		},
		{
			name:    "tombstone delete through OwnerKey",
			handler: informer.Handler{Map: informer.OwnerKey(deployment)},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{
					Key: "ns/child",
					Obj: owned("ns", "child", ref("apps/v1", "Deployment", "web", true)),
				})
			},
			want: []enqueued{{key: key("ns", "web"), typ: informer.Deleted, obj: "child"}},
		},
		{
			name: "tombstone without an object is ignored",
			deliver: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a"})
			},
		},
		{
			name: "objects without metadata are ignored",
			deliver: func(h cache.ResourceEventHandler) {
				h.OnAdd("not an object", true)
				h.OnAdd(nil, false)
				h.OnUpdate(a, 42)
				h.OnUpdate(42, a)
				h.OnDelete(struct{}{})
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "k", Obj: "not an object"})
			},
		},
		{
			name: "a predicate returning false drops the event",
			handler: informer.Handler{Predicates: []informer.Predicate{
				func(informer.Event) bool { return true },
				func(ev informer.Event) bool { return ev.Type != informer.Deleted },
			}},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnDelete(a)
				h.OnAdd(a, false)
			},
			want: []enqueued{{key: key("default", "a"), typ: informer.Added, obj: "a"}},
		},
		{
			name: "predicates run before the MapFunc",
			handler: informer.Handler{
				Map: func(metav1.Object) []types.NamespacedName {
					panic("MapFunc called for a dropped event")
				},
				Predicates: []informer.Predicate{func(informer.Event) bool { return false }},
			},
			deliver: func(h cache.ResourceEventHandler) {
				h.OnAdd(a, true)
				h.OnUpdate(a, aNew)
				h.OnDelete(a)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []enqueued
			tt.deliver(tt.handler.ResourceEventHandler(record(&got)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("enqueued\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestHandlerPredicatesSeeTheEvent checks what a predicate receives: the
// new object and the old one for updates, the last state for deletes.
func TestHandlerPredicatesSeeTheEvent(t *testing.T) {
	oldObj := owned("default", "a")
	oldObj.ResourceVersion = "1"
	newObj := owned("default", "a")
	newObj.ResourceVersion = "2"
	tests := []struct {
		name    string
		deliver func(h cache.ResourceEventHandler)
		want    informer.Event
	}{
		{
			name:    "add",
			deliver: func(h cache.ResourceEventHandler) { h.OnAdd(newObj, true) },
			want:    informer.Event{Type: informer.Added, Object: newObj, InitialList: true},
		},
		{
			name:    "update",
			deliver: func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) },
			want:    informer.Event{Type: informer.Updated, Object: newObj, Old: oldObj},
		},
		{
			name: "tombstone delete",
			deliver: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: oldObj})
			},
			want: informer.Event{Type: informer.Deleted, Object: oldObj},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []informer.Event
			h := informer.Handler{Predicates: []informer.Predicate{func(ev informer.Event) bool {
				seen = append(seen, ev)
				return true
			}}}
			tt.deliver(h.ResourceEventHandler(func(types.NamespacedName, informer.Event) {}))
			if len(seen) != 1 {
				t.Fatalf("predicate called %d times, want 1", len(seen))
			}
			if seen[0] != tt.want {
				t.Errorf("predicate saw %+v, want %+v", seen[0], tt.want)
			}
		})
	}
}

// TestHandlerDoesNotWriteIntoMapFuncResult checks that merging the keys of
// an update's old object never appends into the slice a MapFunc returned,
// which may share its backing array with the MapFunc's own data.
func TestHandlerDoesNotWriteIntoMapFuncResult(t *testing.T) {
	backing := []types.NamespacedName{key("ns", "shared"), key("ns", "sentinel")}
	first := backing[:1] // len 1, cap 2: an append would overwrite backing[1]
	h := informer.Handler{Map: func(obj metav1.Object) []types.NamespacedName {
		if obj.GetResourceVersion() == "2" {
			return first
		}
		return []types.NamespacedName{key("ns", "other")}
	}}
	oldObj, newObj := owned("ns", "a"), owned("ns", "a")
	newObj.ResourceVersion = "2"
	var got []enqueued
	h.ResourceEventHandler(record(&got)).OnUpdate(oldObj, newObj)

	if backing[1] != key("ns", "sentinel") {
		t.Errorf("the MapFunc's array was overwritten: backing[1] = %v", backing[1])
	}
	want := []enqueued{
		{key: key("ns", "shared"), typ: informer.Updated, obj: "a", old: "a"},
		{key: key("ns", "other"), typ: informer.Updated, obj: "a", old: "a"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("enqueued\n got %+v\nwant %+v", got, want)
	}
}

func TestEventTypeString(t *testing.T) {
	tests := []struct {
		typ  informer.EventType
		want string
	}{
		{informer.Added, "add"},
		{informer.Updated, "update"},
		{informer.Deleted, "delete"},
		{informer.EventType(42), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.typ.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// A Handler without a Map enqueues an object's own key for every event,
// and allocates nothing to do it.
func TestHandlerOwnKeyAllocatesNothing(t *testing.T) {
	var got []types.NamespacedName
	h := informer.Handler{}.ResourceEventHandler(func(k types.NamespacedName, _ informer.Event) { got = append(got, k) })
	old, cur := owned("ns", "a"), owned("ns", "a")
	h.OnAdd(cur, false)
	h.OnUpdate(old, cur)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: old})
	if want := []types.NamespacedName{key("ns", "a"), key("ns", "a"), key("ns", "a")}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	got = make([]types.NamespacedName, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		got = got[:0]
		h.OnAdd(cur, false)
		h.OnUpdate(old, cur)
	}); n != 0 {
		t.Errorf("an add and an update: %v allocations, want 0", n)
	}
}
