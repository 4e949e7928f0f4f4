package informer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// ownerLabelKeys files a ConfigMap under each dot-separated part of its
// "owner" label: owner=alice.bob is filed under alice and under bob.
func ownerLabelKeys(cm *corev1.ConfigMap) []string {
	v, ok := cm.Labels["owner"]
	if !ok {
		return nil
	}
	return strings.Split(v, ".")
}

// byRefAnnotation files a ConfigMap under its "ref" annotation, which may
// contain slashes.
func byRefAnnotation(cm *corev1.ConfigMap) []string {
	if v, ok := cm.Annotations["ref"]; ok {
		return []string{v}
	}
	return nil
}

func ownedBy(ns, name, owner string) *corev1.ConfigMap {
	cm := configMap(ns, name, nil)
	if owner != "" {
		cm.Labels = map[string]string{"owner": owner}
	}
	return cm
}

func referencing(ns, name, ref string) *corev1.ConfigMap {
	cm := configMap(ns, name, nil)
	cm.Annotations = map[string]string{"ref": ref}
	return cm
}

// TestIndexLookups declares indexes before and after the Cache starts and
// reads them through ByIndex and ByIndexInNamespace. After start, AddIndex
// files the objects already cached before it returns: the lookups follow
// it at once, with no wait.
func TestIndexLookups(t *testing.T) {
	objs := []runtime.Object{
		ownedBy("team-a", "web", "alice"),
		ownedBy("team-a", "db", "bob"),
		ownedBy("team-b", "web", "alice"),
		ownedBy("team-b", "cache", "alice.bob"),
		ownedBy("team-b", "plain", ""),
		// A key with a slash must not meet namespace/key lookups.
		referencing("x", "short", "y"),
		referencing("z", "long", "x/y"),
	}
	lookups := []struct {
		name      string
		index     string
		namespace string // "-" for ByIndex, else ByIndexInNamespace
		key       string
		want      []string
	}{
		{name: "one key", index: "owner", namespace: "-", key: "bob", want: []string{"team-a/db", "team-b/cache"}},
		{name: "in every namespace", index: "owner", namespace: "-", key: "alice", want: []string{"team-a/web", "team-b/cache", "team-b/web"}},
		{name: "unknown key", index: "owner", namespace: "-", key: "carol", want: []string{}},
		{name: "empty key matches no unlabelled object", index: "owner", namespace: "-", key: "", want: []string{}},
		{name: "in namespace", index: "owner", namespace: "team-a", key: "alice", want: []string{"team-a/web"}},
		{name: "second key of a multi-key object in namespace", index: "owner", namespace: "team-b", key: "bob", want: []string{"team-b/cache"}},
		{name: "empty namespace is every namespace", index: "owner", namespace: "", key: "alice", want: []string{"team-a/web", "team-b/cache", "team-b/web"}},
		{name: "namespace without matches", index: "owner", namespace: "team-c", key: "alice", want: []string{}},
		{name: "key with a slash", index: "ref", namespace: "-", key: "x/y", want: []string{"z/long"}},
		{name: "namespace/key is not a key", index: "ref", namespace: "x", key: "y", want: []string{"x/short"}},
		{name: "key with a slash in namespace", index: "ref", namespace: "z", key: "x/y", want: []string{"z/long"}},
	}
	for _, when := range []string{"before start", "after start"} {
		t.Run(when, func(t *testing.T) {
			c := newCache(t, newCluster(t, objs...), informer.Options{})
			cms, err := informer.For[*corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			declare := func() {
				if err := informer.AddIndex(cms, "owner", ownerLabelKeys); err != nil {
					t.Fatalf("AddIndex owner: %v", err)
				}
				if err := informer.AddIndex(cms, "ref", byRefAnnotation); err != nil {
					t.Fatalf("AddIndex ref: %v", err)
				}
			}
			if when == "before start" {
				declare()
				start(t, c)
			} else {
				start(t, c)
				declare()
			}
			for _, tt := range lookups {
				t.Run(tt.name, func(t *testing.T) {
					var got []string
					var err error
					if tt.namespace == "-" {
						got, err = keys(cms.Lister().ByIndex(tt.index, tt.key))
					} else {
						got, err = keys(cms.Lister().ByIndexInNamespace(tt.namespace, tt.index, tt.key))
					}
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, tt.want) {
						t.Errorf("found %q, want %q", got, tt.want)
					}
				})
			}
		})
	}
}

// TestIndexFollowsWrites writes through the clientset and checks that each
// write moves the object between keys, in both lookups, and that a delete
// removes it.
func TestIndexFollowsWrites(t *testing.T) {
	kube := newCluster(t, ownedBy("team-b", "other", "alice"))
	c := newCache(t, kube, informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	if err := informer.AddIndex(cms, "owner", ownerLabelKeys); err != nil {
		t.Fatal(err)
	}
	l := cms.Lister()
	api := kube.CoreV1().ConfigMaps("team-a")
	write := func(owner string) {
		t.Helper()
		cm := ownedBy("team-a", "x", owner)
		_, err := api.Get(t.Context(), "x", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm, err = api.Create(t.Context(), cm, metav1.CreateOptions{})
		} else {
			cm, err = api.Update(t.Context(), cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "team-a/x at resourceVersion "+cm.ResourceVersion, func() bool {
			got, err := l.Get("team-a", "x")
			return err == nil && got.ResourceVersion == cm.ResourceVersion
		})
	}
	steps := []struct {
		name   string
		write  func()
		all    map[string][]string // ByIndex key -> keys of the objects found
		teamA  map[string][]string // ByIndexInNamespace("team-a", ...)
		absent bool
	}{
		{
			name:  "create under alice",
			write: func() { write("alice") },
			all:   map[string][]string{"alice": {"team-a/x", "team-b/other"}, "bob": {}},
			teamA: map[string][]string{"alice": {"team-a/x"}, "bob": {}},
		},
		{
			name:  "move to bob",
			write: func() { write("bob") },
			all:   map[string][]string{"alice": {"team-b/other"}, "bob": {"team-a/x"}},
			teamA: map[string][]string{"alice": {}, "bob": {"team-a/x"}},
		},
		{
			name:  "under both",
			write: func() { write("alice.bob") },
			all:   map[string][]string{"alice": {"team-a/x", "team-b/other"}, "bob": {"team-a/x"}},
			teamA: map[string][]string{"alice": {"team-a/x"}, "bob": {"team-a/x"}},
		},
		{
			name:  "under none",
			write: func() { write("") },
			all:   map[string][]string{"alice": {"team-b/other"}, "bob": {}},
			teamA: map[string][]string{"alice": {}, "bob": {}},
		},
		{
			name:  "back under both",
			write: func() { write("alice.bob") },
			all:   map[string][]string{"alice": {"team-a/x", "team-b/other"}, "bob": {"team-a/x"}},
			teamA: map[string][]string{"alice": {"team-a/x"}, "bob": {"team-a/x"}},
		},
		{
			name: "delete",
			write: func() {
				if err := api.Delete(t.Context(), "x", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "team-a/x deleted", func() bool {
					_, err := l.Get("team-a", "x")
					return apierrors.IsNotFound(err)
				})
			},
			all:   map[string][]string{"alice": {"team-b/other"}, "bob": {}},
			teamA: map[string][]string{"alice": {}, "bob": {}},
		},
	}
	for _, s := range steps {
		s.write()
		for key, want := range s.all {
			got, err := keys(l.ByIndex("owner", key))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("after %s: ByIndex(owner, %s) found %q, want %q", s.name, key, got, want)
			}
		}
		for key, want := range s.teamA {
			got, err := keys(l.ByIndexInNamespace("team-a", "owner", key))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("after %s: ByIndexInNamespace(team-a, owner, %s) found %q, want %q", s.name, key, got, want)
			}
		}
	}
}

// waitFor polls cond until it holds, and fails t if it has not within 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestAddIndexErrors(t *testing.T) {
	owner := informer.IndexFunc[*corev1.ConfigMap](ownerLabelKeys)
	tests := []struct {
		name    string
		add     func(t *testing.T, c *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error
		started bool
		exists  bool     // the error wraps ErrIndexExists
		want    []string // in the error message
	}{
		{
			name: "nil informer",
			add: func(*testing.T, *informer.Cache, *informer.Informer[*corev1.ConfigMap]) error {
				return informer.AddIndex(nil, "owner", owner)
			},
			want: []string{`"owner"`, "informer is nil", "informer.For"},
		},
		{
			name: "empty name",
			add: func(_ *testing.T, _ *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				return informer.AddIndex(cms, "", owner)
			},
			want: []string{"name is empty"},
		},
		{
			name: "nil function",
			add: func(_ *testing.T, _ *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				return informer.AddIndex(cms, "owner", nil)
			},
			want: []string{`"owner"`, "configmaps.v1", "function is nil"},
		},
		{
			name: "duplicate before start",
			add: func(t *testing.T, _ *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				mustAddIndex(t, cms, "owner", owner)
				return informer.AddIndex(cms, "owner", owner)
			},
			exists: true,
			want:   []string{`"owner"`, "configmaps.v1", "already declared"},
		},
		{
			name: "duplicate after start, declared before",
			add: func(t *testing.T, c *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				mustAddIndex(t, cms, "owner", owner)
				start(t, c)
				return informer.AddIndex(cms, "owner", owner)
			},
			exists: true,
			want:   []string{`"owner"`, "already declared"},
		},
		{
			name: "duplicate through another declaration of the type",
			add: func(t *testing.T, c *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				mustAddIndex(t, cms, "owner", owner)
				again, err := informer.For[*corev1.ConfigMap](c)
				if err != nil {
					t.Fatal(err)
				}
				return informer.AddIndex(again, "owner", owner)
			},
			exists: true,
			want:   []string{`"owner"`, "already declared"},
		},
		{
			name: "client-go's namespace index",
			add: func(_ *testing.T, _ *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				return informer.AddIndex(cms, cache.NamespaceIndex, owner)
			},
			exists: true,
			want:   []string{`"namespace"`, "already declared"},
		},
		{
			name:    "after the cache stopped",
			started: true,
			add: func(_ *testing.T, _ *informer.Cache, cms *informer.Informer[*corev1.ConfigMap]) error {
				return informer.AddIndex(cms, "owner", owner)
			},
			want: []string{`"owner"`, "configmaps.v1", "stopped"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, newCluster(t, ownedBy("default", "a", "alice")), informer.Options{})
			cms, err := informer.For[*corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.started {
				ctx, cancel := context.WithCancel(t.Context())
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				cancel()
				c.Wait()
			}
			err = tt.add(t, c, cms)
			if err == nil {
				t.Fatal("AddIndex succeeded, want an error")
			}
			if got := errors.Is(err, informer.ErrIndexExists); got != tt.exists {
				t.Errorf("errors.Is(%v, ErrIndexExists) = %v, want %v", err, got, tt.exists)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}

	t.Run("a failed declaration leaves the first one working", func(t *testing.T) {
		c := newCache(t, newCluster(t, ownedBy("default", "a", "alice")), informer.Options{})
		cms, err := informer.For[*corev1.ConfigMap](c)
		if err != nil {
			t.Fatal(err)
		}
		mustAddIndex(t, cms, "owner", owner)
		if err := informer.AddIndex(cms, "owner", byRefAnnotation); err == nil {
			t.Fatal("second AddIndex succeeded")
		}
		start(t, c)
		got, err := keys(cms.Lister().ByIndexInNamespace("default", "owner", "alice"))
		if err != nil || !slices.Equal(got, []string{"default/a"}) {
			t.Errorf("ByIndexInNamespace found %q, %v; want [default/a]", got, err)
		}
	})
}

func mustAddIndex[T runtime.Object](t *testing.T, inf *informer.Informer[T], name string, f informer.IndexFunc[T]) {
	t.Helper()
	if err := informer.AddIndex(inf, name, f); err != nil {
		t.Fatalf("AddIndex %q: %v", name, err)
	}
}

func TestByIndexErrors(t *testing.T) {
	c := newCache(t, newCluster(t, ownedBy("default", "a", "alice")), informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	mustAddIndex(t, cms, "owner", ownerLabelKeys)
	start(t, c)

	// An index declared on the indexer outside AddIndex: ByIndex finds
	// it, ByIndexInNamespace has no namespaced companion to read; and the
	// indexer holds a Secret where the Lister wants ConfigMaps.
	raw := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		"raw": func(any) ([]string, error) { return []string{"k"}, nil },
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}}
	if err := raw.Add(secret); err != nil {
		t.Fatal(err)
	}
	rawLister := informer.NewLister[*corev1.ConfigMap](raw, corev1.Resource("configmaps"))

	tests := []struct {
		name string
		read func() ([]*corev1.ConfigMap, error)
		want []string
	}{
		{
			name: "ByIndex of an undeclared index",
			read: func() ([]*corev1.ConfigMap, error) { return cms.Lister().ByIndex("owners", "alice") },
			want: []string{"configmaps", `"owners"`, "informer.AddIndex"},
		},
		{
			name: "ByIndexInNamespace of an undeclared index",
			read: func() ([]*corev1.ConfigMap, error) {
				return cms.Lister().ByIndexInNamespace("default", "owners", "alice")
			},
			want: []string{"configmaps", `"owners"`, "informer.AddIndex"},
		},
		{
			name: "ByIndexInNamespace of an index declared without AddIndex",
			read: func() ([]*corev1.ConfigMap, error) { return rawLister.ByIndexInNamespace("default", "raw", "k") },
			want: []string{`"raw"`, "by namespace", "informer.Indexers"},
		},
		{
			name: "ByIndex of an object of another type",
			read: func() ([]*corev1.ConfigMap, error) { return rawLister.ByIndex("raw", "k") },
			want: []string{"holds *v1.Secret, not *v1.ConfigMap"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read()
			if err == nil {
				t.Fatalf("returned %d objects and no error", len(got))
			}
			if got != nil {
				t.Errorf("returned %d objects with the error", len(got))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestIndexByControllerOwner(t *testing.T) {
	withRefs := func(ns string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
		cm := configMap(ns, "child", nil)
		cm.OwnerReferences = refs
		return cm
	}
	rs := schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	tests := []struct {
		name string
		obj  *corev1.ConfigMap
		want []string
	}{
		{name: "no owner", obj: withRefs("default"), want: nil},
		{name: "owner that is not the controller", obj: withRefs("default", ref("apps/v1", "ReplicaSet", "rs", false)), want: nil},
		{name: "controller in a group", obj: withRefs("default", ref("apps/v1", "ReplicaSet", "rs", true)), want: []string{"ReplicaSet.apps/default/rs"}},
		{name: "controller in the core group", obj: withRefs("default", ref("v1", "ReplicationController", "rc", true)), want: []string{"ReplicationController/default/rc"}},
		{name: "the controller among owners", obj: withRefs("default", ref("v1", "Pod", "p", false), ref("apps/v1", "ReplicaSet", "rs", true)), want: []string{"ReplicaSet.apps/default/rs"}},
		{name: "cluster-scoped object", obj: withRefs("", ref("example.com/v1", "Cluster", "c", true)), want: []string{"Cluster.example.com/c"}},
		{name: "another version of the owner's group", obj: withRefs("default", ref("apps/v1beta2", "ReplicaSet", "rs", true)), want: []string{informer.ControllerKey(rs, "default", "rs")}},
		{name: "malformed apiVersion", obj: withRefs("default", ref("a/b/c", "ReplicaSet", "rs", true)), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := informer.IndexByControllerOwner(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("IndexByControllerOwner = %q, want %q", got, tt.want)
			}
		})
	}

	keyTests := []struct {
		gk              schema.GroupKind
		namespace, name string
		want            string
	}{
		{rs, "default", "rs", "ReplicaSet.apps/default/rs"},
		{schema.GroupKind{Kind: "ReplicationController"}, "default", "rc", "ReplicationController/default/rc"},
		{schema.GroupKind{Group: "example.com", Kind: "Cluster"}, "", "c", "Cluster.example.com/c"},
	}
	for _, tt := range keyTests {
		if got := informer.ControllerKey(tt.gk, tt.namespace, tt.name); got != tt.want {
			t.Errorf("ControllerKey(%v, %q, %q) = %q, want %q", tt.gk, tt.namespace, tt.name, got, tt.want)
		}
	}
}

// TestIndexersWithNewLister builds a Lister without a Cache, as a unit
// test of a reconciler does, with the indexes AddIndex would declare.
// Objects that are not a T are not indexed, and do not fail the indexer.
func TestIndexersWithNewLister(t *testing.T) {
	owner := ref("apps/v1", "ReplicaSet", "rs", true)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc,
		informer.Indexers(informer.ControllerIndex, informer.IndexByControllerOwner[*corev1.ConfigMap]))
	mine := configMap("default", "mine", nil)
	mine.OwnerReferences = []metav1.OwnerReference{owner}
	elsewhere := configMap("other", "elsewhere", nil)
	elsewhere.OwnerReferences = []metav1.OwnerReference{owner}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "secret", OwnerReferences: []metav1.OwnerReference{owner}}}
	for _, obj := range []runtime.Object{mine, elsewhere, secret, configMap("default", "unowned", nil)} {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	l := informer.NewLister[*corev1.ConfigMap](idx, corev1.Resource("configmaps"))
	key := informer.ControllerKey(schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, "default", "rs")
	got, err := keys(l.ByIndex(informer.ControllerIndex, key))
	if err != nil || !slices.Equal(got, []string{"default/mine"}) {
		t.Errorf("ByIndex found %q, %v; want [default/mine]", got, err)
	}
	got, err = keys(l.ByIndexInNamespace("default", informer.ControllerIndex, key))
	if err != nil || !slices.Equal(got, []string{"default/mine"}) {
		t.Errorf("ByIndexInNamespace found %q, %v; want [default/mine]", got, err)
	}
}

// TestIndexCustomAndUnstructured indexes a custom type (converted from
// unstructured before it is cached) and the same resource unstructured.
func TestIndexCustomAndUnstructured(t *testing.T) {
	owned := func(ns, name string) *unstructured.Unstructured {
		u := unstructuredWidget(ns, name, 1)
		u.SetOwnerReferences([]metav1.OwnerReference{ref("apps/v1", "Deployment", "d", true)})
		return u
	}
	dyn := newCluster(t, owned("a", "w1"), owned("b", "w2"), unstructuredWidget("a", "loose", 1))
	c, err := informer.New(dyn.withMapper(newMapper(widgetGVK)),
		informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	untyped, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	mustAddIndex(t, typed, informer.ControllerIndex, informer.IndexByControllerOwner)
	start(t, c)
	mustAddIndex(t, untyped, informer.ControllerIndex, informer.IndexByControllerOwner)

	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	for _, tt := range []struct {
		ns   string
		want []string
	}{{"a", []string{"a/w1"}}, {"b", []string{"b/w2"}}} {
		key := informer.ControllerKey(deployment, tt.ns, "d")
		got, err := keys(typed.Lister().ByIndexInNamespace(tt.ns, informer.ControllerIndex, key))
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("typed: found %q, %v; want %q", got, err, tt.want)
		}
		got, err = keys(untyped.Lister().ByIndex(informer.ControllerIndex, key))
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("unstructured: found %q, %v; want %q", got, err, tt.want)
		}
	}
}

// TestAddIndexConcurrently declares indexes from many goroutines at once,
// after start: each name is declared once, the others get ErrIndexExists,
// and under -race no declaration reads client-go's indexers unlocked.
func TestAddIndexConcurrently(t *testing.T) {
	c := newCache(t, newCluster(t, ownedBy("default", "a", "alice"), ownedBy("default", "b", "bob")), informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	names := []string{"one", "two", "three"}
	const perName = 4
	var won, lost [3]atomic.Int32
	var wg sync.WaitGroup
	for i, name := range names {
		for range perName {
			wg.Go(func() {
				switch err := informer.AddIndex(cms, name, ownerLabelKeys); {
				case err == nil:
					won[i].Add(1)
				case errors.Is(err, informer.ErrIndexExists):
					lost[i].Add(1)
				default:
					t.Errorf("AddIndex %q: %v", name, err)
				}
			})
		}
	}
	wg.Wait()
	for i, name := range names {
		if won[i].Load() != 1 || lost[i].Load() != perName-1 {
			t.Errorf("%d concurrent AddIndex %q: %d succeeded, %d failed with ErrIndexExists; want 1 and %d",
				perName, name, won[i].Load(), lost[i].Load(), perName-1)
		}
		got, err := keys(cms.Lister().ByIndexInNamespace("default", name, "alice"))
		if err != nil || !slices.Equal(got, []string{"default/a"}) {
			t.Errorf("ByIndexInNamespace(default, %s, alice) found %q, %v; want [default/a]", name, got, err)
		}
	}
}

// TestIndexUnderConcurrentWrites declares an index after start while
// writers create, move and delete objects through the clientset and
// readers look the index up. Two goroutines declare the same name: one
// wins. Throughout, every object a lookup returns is filed under the key
// looked up; at the end, once the cache has caught up with the server,
// every lookup equals the server's objects with that key, both for the
// objects AddIndex filed when it was called and for those written since.
// Meaningful under -race.
func TestIndexUnderConcurrentWrites(t *testing.T) {
	const (
		writers      = 4
		perWriter    = 10    // objects each writer creates, moves and deletes
		statics      = 20000 // objects no writer touches: AddIndex files them, for long enough to overlap writes
		writesBefore = 100   // in all, before AddIndex is called
		writesAfter  = 40    // by each writer, after AddIndex returned
		maxInFlight  = 50    // writes the informer has not handled: the fake watch panics past 100
	)
	owners := []string{"o0", "o1", "o2", "o3", "o4"} // the writers' keys
	namespaces := []string{"ns-0", "ns-1"}
	// The objects no writer touches: enough of them that AddIndex's
	// filing overlaps the writers' events.
	var staticObjs []runtime.Object
	for i := range statics {
		staticObjs = append(staticObjs, ownedBy(namespaces[i/10%2], fmt.Sprintf("static-%d", i), fmt.Sprintf("s%d", i%10)))
	}
	kube := newCluster(t, staticObjs...)
	c := newCache(t, kube, informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	// Each handled event returns a token a write took.
	inFlight := make(chan struct{}, maxInFlight)
	var handledEvents atomic.Int64
	handled := func() {
		handledEvents.Add(1)
		select {
		case <-inFlight:
		default:
		}
	}
	reg, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { handled() },
		UpdateFunc: func(any, any) { handled() },
		DeleteFunc: func(any) { handled() },
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitFor(t, "the counting handler to sync", reg.HasSynced)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		written atomic.Int64
		added   atomic.Bool // AddIndex has returned
		writing sync.WaitGroup
	)
	for w := range writers {
		writing.Go(func() {
			rnd := rand.New(rand.NewPCG(1, uint64(w)))
			exists := make([]bool, perWriter)
			for after := 0; after < writesAfter; {
				if added.Load() {
					after++
				}
				select {
				case inFlight <- struct{}{}:
				case <-ctx.Done():
					t.Errorf("writer %d: %v waiting for the informer to handle writes", w, ctx.Err())
					return
				}
				j := rnd.IntN(perWriter)
				ns := namespaces[j%2]
				api := kube.CoreV1().ConfigMaps(ns)
				cm := ownedBy(ns, fmt.Sprintf("w%d-%d", w, j), "")
				switch n := rnd.IntN(len(owners) + 1); {
				case n < len(owners)-1: // one key
					cm.Labels = map[string]string{"owner": owners[n]}
				case n == len(owners)-1: // two keys
					cm.Labels = map[string]string{"owner": owners[rnd.IntN(2)] + "." + owners[2+rnd.IntN(3)]}
				} // else none
				var err error
				switch {
				case !exists[j]:
					_, err = api.Create(ctx, cm, metav1.CreateOptions{})
					exists[j] = true
				case rnd.IntN(4) == 0:
					err = api.Delete(ctx, cm.Name, metav1.DeleteOptions{})
					exists[j] = false
				default:
					_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				written.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	var reading sync.WaitGroup
	for r := range 2 {
		reading.Go(func() {
			rnd := rand.New(rand.NewPCG(2, uint64(r)))
			tick := time.NewTicker(500 * time.Microsecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				key := owners[rnd.IntN(len(owners))]
				ns := ""
				if rnd.IntN(2) == 0 {
					ns = namespaces[rnd.IntN(2)]
				}
				declared := added.Load() // before the lookup
				found, err := cms.Lister().ByIndexInNamespace(ns, "owner", key)
				if err != nil {
					if declared || !strings.Contains(err.Error(), "informer.AddIndex") {
						t.Errorf("ByIndexInNamespace(%q, owner, %s), AddIndex returned %v: %v", ns, key, declared, err)
						return
					}
					continue
				}
				for _, cm := range found {
					if !slices.Contains(ownerLabelKeys(cm), key) || (ns != "" && cm.Namespace != ns) {
						t.Errorf("ByIndexInNamespace(%q, owner, %s) returned %s/%s with owner %q",
							ns, key, cm.Namespace, cm.Name, cm.Labels["owner"])
						return
					}
				}
			}
		})
	}

	waitFor(t, "writes before AddIndex", func() bool { return written.Load() >= writesBefore })
	var won, lost atomic.Int32
	var adding sync.WaitGroup
	writtenBefore, handledBefore, began := written.Load(), handledEvents.Load(), time.Now()
	for range 2 {
		adding.Go(func() {
			switch err := informer.AddIndex(cms, "owner", ownerLabelKeys); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, informer.ErrIndexExists):
				lost.Add(1)
			default:
				t.Errorf("AddIndex: %v", err)
			}
		})
	}
	adding.Wait()
	added.Store(true)
	t.Logf("AddIndex took %v; meanwhile %d writes were sent and %d events handled",
		time.Since(began), written.Load()-writtenBefore, handledEvents.Load()-handledBefore)
	if won.Load() != 1 || lost.Load() != 1 {
		t.Errorf("two concurrent AddIndex of one name: %d succeeded, %d failed with ErrIndexExists; want 1 and 1", won.Load(), lost.Load())
	}
	writing.Wait()
	close(stop)
	reading.Wait()
	if t.Failed() {
		return
	}

	// The cache catches up with the server; the index must equal it.
	list, err := kube.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server := list.Items
	waitFor(t, "the cache to hold what the server holds", func() bool {
		cached, err := cms.Lister().List(nil)
		if err != nil || len(cached) != len(server) {
			return false
		}
		for _, want := range server {
			got, err := cms.Lister().Get(want.Namespace, want.Name)
			if err != nil || got.ResourceVersion != want.ResourceVersion {
				return false
			}
		}
		return true
	})
	writersFound := 0
	for _, key := range append([]string{"s0", "s9"}, owners...) {
		for _, ns := range append([]string{""}, namespaces...) {
			var want []string
			for _, cm := range server {
				if slices.Contains(ownerLabelKeys(&cm), key) && (ns == "" || cm.Namespace == ns) {
					want = append(want, cm.Namespace+"/"+cm.Name)
				}
			}
			slices.Sort(want)
			got, err := keys(cms.Lister().ByIndexInNamespace(ns, "owner", key))
			if err != nil {
				t.Fatal(err)
			}
			wantStatics := statics / 10
			if ns != "" {
				wantStatics /= len(namespaces)
			}
			if strings.HasPrefix(key, "s") && len(want) != wantStatics {
				t.Fatalf("the server has %d objects with key %s in namespace %q, want %d", len(want), key, ns, wantStatics)
			}
			if strings.HasPrefix(key, "o") {
				writersFound += len(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("ByIndexInNamespace(%q, owner, %s): %d objects, want %d; missing %q, extra %q",
					ns, key, len(got), len(want), minus(want, got), minus(got, want))
			}
		}
	}
	if writersFound == 0 {
		t.Error("no written object is left under the writers' keys: the test checks nothing written")
	}
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// startExample starts c and waits for it to sync; the returned func stops
// it. A Manager does this.
func startExample(c *informer.Cache) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stop = func() { cancel(); c.Wait() }
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	syncCtx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		panic(err)
	}
	return stop
}

// Find the ConfigMaps a Deployment controls: index them by controlling
// owner before the cache starts, and look the owner up by its key.
func ExampleAddIndex() {
	isController := true
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "1", Controller: &isController}
	owned := func(name string) *corev1.ConfigMap {
		cm := exampleConfigMap("default", name, nil)
		cm.OwnerReferences = []metav1.OwnerReference{owner}
		return cm
	}
	c, err := informer.New(exampleClients(owned("web-config"), owned("web-routes"), exampleConfigMap("default", "other", nil)), informer.Options{})
	if err != nil {
		panic(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		panic(err)
	}
	if err := informer.AddIndex(cms, informer.ControllerIndex, informer.IndexByControllerOwner); err != nil {
		panic(err)
	}
	stop := startExample(c)
	defer stop()

	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	found, err := cms.Lister().ByIndex(informer.ControllerIndex, informer.ControllerKey(deployment, "default", "web"))
	if err != nil {
		panic(err)
	}
	var names []string
	for _, cm := range found {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	fmt.Println(names)
	// Output: [web-config web-routes]
}

// Any function of the object is an index: here the Secret a ConfigMap
// names in an annotation, to find the ConfigMaps of one namespace that
// reference a Secret when it changes.
func ExampleLister_ByIndexInNamespace() {
	refersTo := func(ns, name, secret string) *corev1.ConfigMap {
		cm := exampleConfigMap(ns, name, nil)
		cm.Annotations = map[string]string{"example.com/secret": secret}
		return cm
	}
	c, err := informer.New(exampleClients(
		refersTo("team-a", "app", "db-password"),
		refersTo("team-b", "app", "db-password"),
		refersTo("team-a", "cache", "cache-token"),
	), informer.Options{})
	if err != nil {
		panic(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		panic(err)
	}
	stop := startExample(c)
	defer stop()
	// After start, AddIndex files the ConfigMaps already cached before it
	// returns.
	err = informer.AddIndex(cms, "secret", func(cm *corev1.ConfigMap) []string {
		if s, ok := cm.Annotations["example.com/secret"]; ok {
			return []string{s}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}

	found, err := cms.Lister().ByIndexInNamespace("team-a", "secret", "db-password")
	if err != nil {
		panic(err)
	}
	for _, cm := range found {
		fmt.Println(cm.Namespace, cm.Name)
	}
	// Output: team-a app
}
