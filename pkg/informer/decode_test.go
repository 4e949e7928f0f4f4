package informer_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// fakeClients returns Clients over the fake API server cluster.
func fakeClients(t *testing.T, cluster *fake.Cluster) informer.Clients {
	t.Helper()
	return informer.Clients{Config: cluster.Config(), Mapper: cluster.RESTMapper()}
}

// dynamicFor returns a dynamic client of the fake API server cluster.
func dynamicFor(t *testing.T, cluster *fake.Cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// newFakeCluster returns a fake API server that serves scheme and holds objs.
func newFakeCluster(t *testing.T, scheme *runtime.Scheme, objs ...runtime.Object) *fake.Cluster {
	t.Helper()
	cluster, err := fake.New(fake.Options{Scheme: scheme, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	return cluster
}

func typedWidget(ns, name string, size int, lbls map[string]string) *Widget {
	return &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Spec: WidgetSpec{Size: size}}
}

// waitUntil polls cond until it holds, and fails t if it has not within 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// TestForCustomTypeDecodesJSON: with Clients.Config, a custom type's
// informer lists and watches the fake API server and caches *Widget values
// decoded from JSON, with their kind set and managedFields stripped.
func TestForCustomTypeDecodesJSON(t *testing.T) {
	managed := typedWidget("default", "small", 1, nil)
	managed.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	cluster := newFakeCluster(t, widgetScheme(), managed, typedWidget("default", "large", 42, nil))
	clients := fakeClients(t, cluster)
	var requests syncBuffer
	clients.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			requests.add(req.Method + " " + req.URL.Path + "?" + req.URL.RawQuery + " Accept: " + req.Header.Get("Accept"))
			return rt.RoundTrip(req)
		})
	})
	c, err := informer.New(clients, informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	// The informer lists once, consistently (resourceVersion "", no page
	// size; not client-go's default WatchList), as JSON, then watches.
	path := "/apis/test.ctrlkit.io/v1/widgets"
	if got := requests.matching("GET " + path + "?"); len(got) != 2 ||
		got[0] != "GET "+path+"? Accept: application/json" ||
		!strings.Contains(got[1], "watch=true") || strings.Contains(got[1], "sendInitialEvents") {
		t.Errorf("requests for widgets = %q, want a list with no resourceVersion or limit, then a watch", got)
	}

	small, err := widgets.Lister().Get("default", "small")
	if err != nil {
		t.Fatal(err)
	}
	if small.Spec.Size != 1 {
		t.Errorf("Spec.Size = %d, want 1", small.Spec.Size)
	}
	if small.ManagedFields != nil {
		t.Errorf("ManagedFields = %v, want them stripped", small.ManagedFields)
	}
	if got := small.GroupVersionKind(); got != widgetGVK {
		t.Errorf("cached object's kind = %v, want %v", got, widgetGVK)
	}

	dyn := dynamicFor(t, cluster).Resource(widgetGVR).Namespace("default")
	ctx := t.Context()
	if _, err := dyn.Patch(ctx, "small", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Create(ctx, unstructuredWidget("default", "new", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Delete(ctx, "large", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the update, the create and the delete", func() bool {
		s, err := widgets.Lister().Get("default", "small")
		if err != nil || s.Spec.Size != 2 {
			return false
		}
		n, err := widgets.Lister().Get("default", "new")
		if err != nil || n.Spec.Size != 3 || n.GroupVersionKind() != widgetGVK {
			return false
		}
		_, err = widgets.Lister().Get("default", "large")
		return apierrors.IsNotFound(err)
	})
}

// TestForCustomTypeScope: namespace and label scope narrow what a custom
// type's informer lists and watches.
func TestForCustomTypeScope(t *testing.T) {
	objs := []runtime.Object{
		typedWidget("team-a", "web", 1, map[string]string{"app": "web"}),
		typedWidget("team-a", "db", 2, map[string]string{"app": "db"}),
		typedWidget("team-b", "web", 3, map[string]string{"app": "web"}),
	}
	tests := []struct {
		name string
		opts informer.Options
		want []string // after team-b/web2 and team-a/web2 (app=web) are created
	}{
		{name: "everything", want: []string{"team-a/db", "team-a/web", "team-a/web2", "team-b/web", "team-b/web2"}},
		{name: "namespace", opts: informer.Options{Namespaces: []string{"team-a"}}, want: []string{"team-a/db", "team-a/web", "team-a/web2"}},
		{name: "label selector", opts: informer.Options{TweakListOptions: func(o *metav1.ListOptions) { o.LabelSelector = "app=web" }},
			want: []string{"team-a/web", "team-a/web2", "team-b/web", "team-b/web2"}},
		{name: "by type", opts: informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&Widget{}: {Namespaces: []string{"team-b"}, LabelSelector: "app=web"}}},
			want: []string{"team-b/web", "team-b/web2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := newFakeCluster(t, widgetScheme(), objs...)
			tt.opts.Scheme = widgetScheme()
			c, err := informer.New(fakeClients(t, cluster), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			widgets, err := informer.For[*Widget](c)
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)
			dyn := dynamicFor(t, cluster).Resource(widgetGVR)
			for _, ns := range []string{"team-a", "team-b"} {
				w := unstructuredWidget(ns, "web2", 4)
				w.SetLabels(map[string]string{"app": "web"})
				if _, err := dyn.Namespace(ns).Create(t.Context(), w, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			waitUntil(t, fmt.Sprintf("the cache to hold %v", tt.want), func() bool {
				got, err = keys(widgets.Lister().List(labels.Everything()))
				return err == nil && slices.Equal(got, tt.want)
			})
		})
	}
}

// TestForCustomTypeReadYourWrites: a client whose Cache is the informer's
// cache returns from a write once a Lister read shows it.
func TestForCustomTypeReadYourWrites(t *testing.T) {
	cluster := newFakeCluster(t, widgetScheme())
	c, err := informer.New(fakeClients(t, cluster), informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	cl, err := client.New(cluster.Config(), client.Options{Scheme: widgetScheme(), Mapper: cluster.RESTMapper(), Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := typedWidget("default", "w", 1, nil)
	if err := cl.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, err := widgets.Lister().Get("default", "w"); err != nil || got.ResourceVersion != w.ResourceVersion {
		t.Fatalf("right after Create: Get = %v, %v; want resourceVersion %s", got, err, w.ResourceVersion)
	}
	w.Spec.Size = 2
	if err := cl.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, err := widgets.Lister().Get("default", "w"); err != nil || got.Spec.Size != 2 {
		t.Fatalf("right after Update: Get = %v, %v; want size 2", got, err)
	}
	if err := cl.Delete(ctx, w, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets.Lister().Get("default", "w"); !apierrors.IsNotFound(err) {
		t.Fatalf("right after Delete: Get error = %v, want NotFound", err)
	}
}

// TestForCustomTypeNeedsListType: without its List type in the scheme, a
// custom type cannot be listed; the error names what to register.
func TestForCustomTypeNeedsListType(t *testing.T) {
	cluster := newFakeCluster(t, widgetScheme())
	noList := runtime.NewScheme()
	noList.AddKnownTypes(widgetGV, &Widget{})
	metav1.AddToGroupVersion(noList, widgetGV)
	c, err := informer.New(fakeClients(t, cluster), informer.Options{Scheme: noList})
	if err != nil {
		t.Fatal(err)
	}
	_, err = informer.For[*Widget](c)
	if err == nil {
		t.Fatal("For succeeded, want an error")
	}
	for _, want := range []string{"For[*informer_test.Widget]", "test.ctrlkit.io/v1, Kind=WidgetList", "AddKnownTypes(test.ctrlkit.io/v1, &Widget{}, &WidgetList{})"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// LooseWidget is how the server sees a Widget in TestForCustomTypeDecodeErrors:
// its spec is any JSON, so it can hold a size that does not fit Widget's int.
type LooseWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]any `json:"spec,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (w *LooseWidget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = runtime.DeepCopyJSON(w.Spec)
	return &out
}

// LooseWidgetList is a list of LooseWidgets.
type LooseWidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LooseWidget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *LooseWidgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]LooseWidget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*LooseWidget)
	}
	return &out
}

// syncBuffer collects log lines written from any goroutine.
type syncBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *syncBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *syncBuffer) logger() logr.Logger {
	return funcr.New(func(_, args string) { b.add(args) }, funcr.Options{})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (b *syncBuffer) matching(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}

// TestForCustomTypeDecodeErrors: an object that does not decode into the
// Go type is left out of the cache, logged and counted, and the rest of
// its list is cached; an object that stops decoding leaves the cache when
// the reflector relists after the watch event, and returns once it decodes
// again.
func TestForCustomTypeDecodeErrors(t *testing.T) {
	serverScheme := runtime.NewScheme()
	serverScheme.AddKnownTypeWithName(widgetGVK, &LooseWidget{})
	serverScheme.AddKnownTypeWithName(widgetGV.WithKind("WidgetList"), &LooseWidgetList{})
	metav1.AddToGroupVersion(serverScheme, widgetGV)
	loose := func(name string, size any) *LooseWidget {
		return &LooseWidget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: map[string]any{"size": size}}
	}
	cluster := newFakeCluster(t, serverScheme, loose("good", int64(1)), loose("bad", "big"), loose("other", int64(2)))
	c, err := informer.New(fakeClients(t, cluster), informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	count := func() float64 {
		all, err := reg.Gather()
		var mfs []*dto.MetricFamily
		for _, mf := range all {
			if mf.GetName() == "ctrlkit_cache_decode_errors_total" {
				mfs = append(mfs, mf)
			}
		}
		if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
			t.Fatalf("Gather = %v, %v; want one ctrlkit_cache_decode_errors_total series", all, err)
		}
		m := mfs[0].GetMetric()[0]
		if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "informer" || l[0].GetValue() != widgets.Name() {
			t.Fatalf("labels = %v, want informer=%q", l, widgets.Name())
		}
		return m.GetCounter().GetValue()
	}
	if n := count(); n != 0 {
		t.Errorf("ctrlkit_cache_decode_errors_total = %v before Start, want 0", n)
	}

	var logs syncBuffer
	ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), logs.logger()))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Wait()
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
	defer cancelSync()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	got, err := keys(widgets.Lister().List(nil))
	if want := []string{"default/good", "default/other"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("cached %v, %v; want %v", got, err, want)
	}
	if n := count(); n < 1 {
		t.Errorf("ctrlkit_cache_decode_errors_total = %v, want at least 1", n)
	}
	if l := logs.matching("Leaving out of the cache", `"name"="bad"`, `"namespace"="default"`, widgets.Name(), "cannot unmarshal string"); len(l) == 0 {
		t.Errorf("no log line names the object left out; logs: %q", logs.matching(""))
	}

	dyn := dynamicFor(t, cluster).Resource(widgetGVR).Namespace("default")
	before := count()
	if _, err := dyn.Patch(ctx, "good", types.MergePatchType, []byte(`{"spec":{"size":"huge"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the relist that meets the bad version of default/good and keeps the last one that decoded", func() bool {
		return len(logs.matching("Keeping in the cache the last version", `"name"="good"`)) > 0
	})
	if w, err := widgets.Lister().Get("default", "good"); err != nil || w.Spec.Size != 1 {
		t.Errorf("default/good after its update stopped decoding: %+v, %v; want the last version that decoded (size 1), not a deletion", w, err)
	}
	if n := count(); n < before+2 {
		t.Errorf("ctrlkit_cache_decode_errors_total = %v after the relist, want at least %v (bad and good)", n, before+2)
	}
	if _, err := widgets.Lister().Get("default", "other"); err != nil {
		t.Errorf("default/other after the relist: %v", err)
	}
	if _, err := dyn.Patch(ctx, "good", types.MergePatchType, []byte(`{"spec":{"size":5}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "default/good to return", func() bool {
		w, err := widgets.Lister().Get("default", "good")
		return err == nil && w.Spec.Size == 5
	})
}
