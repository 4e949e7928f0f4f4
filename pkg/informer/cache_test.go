package informer_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

func TestNewValidation(t *testing.T) {
	good := clientsWith(t, newMapper())
	without := func(edit func(*informer.Clients)) informer.Clients {
		c := good
		edit(&c)
		return c
	}
	tests := []struct {
		name    string
		clients informer.Clients
		opts    informer.Options
		wantErr string // substring; "" means success
	}{
		{name: "valid zero options", clients: good},
		{name: "valid options", clients: good, opts: informer.Options{
			Namespaces:   []string{"default", "kube-system"},
			Resync:       time.Minute,
			ResyncByType: map[runtime.Object]time.Duration{&corev1.ConfigMap{}: 0, &corev1.Secret{}: time.Hour},
		}},
		{name: "nil Config", clients: without(func(c *informer.Clients) { c.Config = nil }), wantErr: "Clients.Config is nil"},
		{name: "nil Mapper: one from discovery", clients: without(func(c *informer.Clients) { c.Mapper = nil })},
		{name: "negative Resync", clients: good, opts: informer.Options{Resync: -time.Second}, wantErr: "Options.Resync is -1s"},
		{name: "negative DiscoveryInterval", clients: good, opts: informer.Options{DiscoveryInterval: -time.Second}, wantErr: "Options.DiscoveryInterval is -1s"},
		{name: "empty namespace in the list", clients: good, opts: informer.Options{Namespaces: []string{"a", ""}}, wantErr: "Options.Namespaces[1] is empty"},
		{name: "repeated namespace", clients: good, opts: informer.Options{Namespaces: []string{"a", "b", "a"}}, wantErr: `Options.Namespaces lists "a" twice`},
		{name: "repeated namespace by type", clients: good, opts: informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {Namespaces: []string{"a", "a"}}}}, wantErr: `Options.ByType[*v1.ConfigMap].Namespaces lists "a" twice`},
		{
			name:    "ResyncByType key that is not an object",
			clients: good,
			opts:    informer.Options{ResyncByType: map[runtime.Object]time.Duration{&corev1.ConfigMapList{}: time.Minute}},
			wantErr: "Options.ResyncByType[*v1.ConfigMapList]",
		},
		{
			name:    "ResyncByType negative period",
			clients: good,
			opts:    informer.Options{ResyncByType: map[runtime.Object]time.Duration{&corev1.ConfigMap{}: -time.Minute}},
			wantErr: "Options.ResyncByType[*v1.ConfigMap] = -1m0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := informer.New(tt.clients, tt.opts)
			if tt.wantErr == "" {
				if err != nil || c == nil {
					t.Fatalf("New = %v, %v; want a cache", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
			if c != nil {
				t.Errorf("New returned a cache with an error")
			}
		})
	}
}

func TestForReturnsTheSameInformer(t *testing.T) {
	c := newCache(t, newCluster(t), informer.Options{})
	first, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	second, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("For twice returned two different client-go informers")
	}
	if got, want := first.GroupVersionResource(), corev1.SchemeGroupVersion.WithResource("configmaps"); got != want {
		t.Errorf("GroupVersionResource = %v, want %v", got, want)
	}
	if got, want := c.Declared(), []string{"configmaps.v1 (*v1.ConfigMap)"}; !slices.Equal(got, want) {
		t.Errorf("Declared = %q, want %q", got, want)
	}
	if got := len(c.Informers()); got != 1 {
		t.Errorf("len(Informers) = %d, want 1", got)
	}
}

func TestInformersInDeclarationOrder(t *testing.T) {
	c, err := informer.New(clientsWith(t, newMapper(widgetGVK)),
		informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informer.For[*corev1.Secret](c); err != nil {
		t.Fatal(err)
	}
	if _, err := informer.ForResource(c, widgetGVR); err != nil {
		t.Fatal(err)
	}
	if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Informers() {
		got = append(got, s.Name())
	}
	want := []string{"secrets.v1 (*v1.Secret)", "widgets.v1.test.ctrlkit.io (unstructured)", "configmaps.v1 (*v1.ConfigMap)"}
	if !slices.Equal(got, want) {
		t.Errorf("Informers names = %q, want %q", got, want)
	}
	slices.Sort(want)
	if got := c.Declared(); !slices.Equal(got, want) {
		t.Errorf("Declared = %q, want sorted %q", got, want)
	}
}

// valueObject is an API object type whose methods have value receivers, so
// that the non-pointer type satisfies runtime.Object.
type valueObject struct{}

func (valueObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (valueObject) DeepCopyObject() runtime.Object   { return valueObject{} }

func TestForErrors(t *testing.T) {
	tests := []struct {
		name    string
		scheme  *runtime.Scheme
		declare func(*informer.Cache) error
		want    []string // substrings of the error
	}{
		{
			name:    "type not in the scheme",
			declare: func(c *informer.Cache) error { _, err := informer.For[*Widget](c); return err },
			want:    []string{"For[*informer_test.Widget]", "not in the scheme", "AddToScheme", "Options.Scheme"},
		},
		{
			name:    "type the RESTMapper does not know",
			scheme:  widgetScheme(),
			declare: func(c *informer.Cache) error { _, err := informer.For[*Widget](c); return err },
			want:    []string{"For[*informer_test.Widget]", "does not serve test.ctrlkit.io/v1, Kind=Widget", "CRD"},
		},
		{
			name: "resource the RESTMapper does not know",
			declare: func(c *informer.Cache) error {
				_, err := informer.ForResource(c, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"})
				return err
			},
			want: []string{"ForResource(gadgets.v1.example.com)", "CRD"},
		},
		{
			name:    "non-pointer T",
			declare: func(c *informer.Cache) error { _, err := informer.For[valueObject](c); return err },
			want:    []string{"For[informer_test.valueObject]", "T must be a pointer to an API struct"},
		},
		{
			name:    "interface T",
			declare: func(c *informer.Cache) error { _, err := informer.For[runtime.Object](c); return err },
			want:    []string{"For[runtime.Object]", "T must be a pointer to an API struct"},
		},
		{
			name:    "built-in type missing from a custom scheme",
			scheme:  widgetScheme(),
			declare: func(c *informer.Cache) error { _, err := informer.For[*corev1.ConfigMap](c); return err },
			want:    []string{"For[*v1.ConfigMap]", "AddToScheme"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := informer.New(newCluster(t).withMapper(newMapper()), informer.Options{Scheme: tt.scheme})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.declare(c)
			if err == nil {
				t.Fatal("declaring succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := c.Declared(); len(got) != 0 {
				t.Errorf("a failed declaration left informers behind: %q", got)
			}
		})
	}
}

func TestDeclaringAfterStart(t *testing.T) {
	c, err := informer.New(clientsWith(t, newMapper(widgetGVK)),
		informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	declared, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	again, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatalf("For of a declared type after Start: %v", err)
	}
	if again != declared {
		t.Error("For after Start returned a different informer")
	}

	// Declared after Start, an informer starts at once and syncs.
	secrets, err := informer.For[*corev1.Secret](c)
	if err != nil {
		t.Fatalf("For of a new type after Start: %v", err)
	}
	widgets, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatalf("ForResource of a new resource after Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := informer.WaitForSources(ctx, logr.Discard(), 0, secrets, widgets); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Informers()); got != 3 {
		t.Errorf("len(Informers) = %d after two declarations after Start, want 3", got)
	}
	if err := c.Start(t.Context()); err == nil {
		t.Error("second Start succeeded, want an error")
	}
}

func TestWaitForSync(t *testing.T) {
	t.Run("returns nil once synced", func(t *testing.T) {
		c := newCache(t, newCluster(t, configMap("default", "a", nil), configMap("default", "b", nil)), informer.Options{})
		cms, err := informer.For[*corev1.ConfigMap](c)
		if err != nil {
			t.Fatal(err)
		}
		if cms.HasSynced() {
			t.Fatal("HasSynced before Start")
		}
		start(t, c) // fails the test unless WaitForSync returns nil
		if !cms.HasSynced() {
			t.Error("HasSynced is false after WaitForSync returned nil")
		}
		if got := cms.Len(); got != 2 {
			t.Errorf("Len = %d, want 2", got)
		}
	})

	t.Run("with nothing declared returns nil at once", func(t *testing.T) {
		c := newCache(t, newCluster(t), informer.Options{})
		start(t, c)
	})

	t.Run("errors naming the informer that cannot sync", func(t *testing.T) {
		kube := newCluster(t)
		kube.react("list", "configmaps", func(*http.Request) (*http.Response, error) {
			return statusResponse(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("configmaps are forbidden"))), nil
		})
		c := newCache(t, kube, informer.Options{})
		if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cancel()
			c.Wait()
		}()
		syncCtx, cancelSync := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancelSync()
		var progress []string // WaitForSync logs on the calling goroutine
		log := funcr.New(func(prefix, args string) { progress = append(progress, args) }, funcr.Options{})
		began := time.Now()
		err := c.WaitForSync(syncCtx, log, 10*time.Millisecond)
		if err == nil {
			t.Fatal("WaitForSync = nil, want an error")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap the ctx's cause", err)
		}
		if !strings.Contains(err.Error(), "configmaps.v1 (*v1.ConfigMap) (0 objects listed)") {
			t.Errorf("error %q does not name the informer", err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("WaitForSync returned %v after its ctx expired", d)
		}
		want := `"level"=0 "msg"="Waiting for cache to sync" "informer"="configmaps.v1 (*v1.ConfigMap)" "objects"=0`
		if len(progress) == 0 || progress[0] != want {
			t.Errorf("progress logs = %q, want lines like %q", progress, want)
		}
	})
}

func TestNamespaceOption(t *testing.T) {
	kube := newCluster(t,
		configMap("team-a", "a1", nil), configMap("team-a", "a2", nil), configMap("team-b", "b1", nil),
		namespace("team-a"), namespace("team-b"), // cluster-scoped: unaffected by Namespace
	)
	kube.add(t, unstructuredWidget("team-a", "wa", 1), unstructuredWidget("team-b", "wb", 2))
	c, err := informer.New(kube.withMapper(newMapper(widgetGVK)),
		informer.Options{Namespaces: []string{"team-a"}, Scheme: builtinAndWidgetScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	unstructuredWidgets, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := informer.For[*corev1.Namespace](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	tests := []struct {
		name string
		list func() ([]string, error)
		want []string
	}{
		{name: "typed built-in", list: func() ([]string, error) { return keys(cms.Lister().List(nil)) }, want: []string{"team-a/a1", "team-a/a2"}},
		{name: "typed custom", list: func() ([]string, error) { return keys(widgets.Lister().List(nil)) }, want: []string{"team-a/wa"}},
		{name: "unstructured", list: func() ([]string, error) { return keys(unstructuredWidgets.Lister().List(nil)) }, want: []string{"team-a/wa"}},
		{name: "cluster-scoped", list: func() ([]string, error) { return keys(namespaces.Lister().List(nil)) }, want: []string{"team-a", "team-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.list()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("cached %q, want %q", got, tt.want)
			}
		})
	}
}

func namespace(name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	ns.Name = name
	return ns
}

// keys returns the sorted cache keys (namespace/name, or name) of objs.
func keys[T runtime.Object](objs []T, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		k, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// TestResyncByType checks that a per-type resync period reaches both
// kinds of typed informers: built-in (protobuf) and custom (JSON into the
// Go type). client-go resyncs handlers at most once a second, so
// this test takes about that long.
func TestResyncByType(t *testing.T) {
	kube := newCluster(t, configMap("default", "a", nil))
	kube.add(t, unstructuredWidget("default", "w", 1))
	c, err := informer.New(kube.withMapper(newMapper(widgetGVK)), informer.Options{
		Scheme:       builtinAndWidgetScheme(t),
		ResyncByType: map[runtime.Object]time.Duration{&corev1.ConfigMap{}: time.Second, &Widget{}: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	resynced := make(chan string, 10)
	isResync := func(ev informer.Event) bool {
		return ev.Type == informer.Updated && !informer.ResourceVersionChanged()(ev)
	}
	onlyResyncs := informer.Handler{Predicates: []informer.Predicate{isResync}}
	for _, src := range []informer.Source{cms, widgets} {
		name := src.Name()
		h := onlyResyncs.ResourceEventHandler(func(types.NamespacedName, informer.Event) {
			select {
			case resynced <- name:
			default:
			}
		})
		if _, err := src.AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
	}
	start(t, c)

	want := map[string]bool{cms.Name(): true, widgets.Name(): true}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case name := <-resynced:
			delete(want, name)
		case <-deadline:
			t.Fatalf("no resync within 10s for %v", want)
		}
	}
}

// TestListerGetAllocatesOnlyItsKey: a Get from an informer of one part
// (every namespace) allocates the key it looks up and nothing else; it
// runs in every Reconcile.
func TestListerGetAllocatesOnlyItsKey(t *testing.T) {
	c := newCache(t, newCluster(t, configMap("default", "a", nil)), informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	lister := cms.Lister()
	if _, err := lister.Get("default", "a"); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = lister.Get("default", "a") }); n > 1 {
		t.Errorf("Get allocated %.0f times, want at most 1 (its key)", n)
	}
}
