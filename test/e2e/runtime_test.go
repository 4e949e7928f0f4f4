package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestThreeNamespacesCached: a manager caching three namespaces (one
// informer each, one Lister over them) reconciles the ConfigMaps of those
// three, listed at start and created later, and never those of a fourth;
// its Lister answers for the three and refuses the fourth with
// ErrNamespaceNotCached. Its lists and watches go to the three namespaces'
// paths only.
func TestThreeNamespacesCached(t *testing.T) {
	cached := []string{newNamespace(t), newNamespace(t), newNamespace(t)}
	other := newNamespace(t)
	var mu sync.Mutex
	gets, watches := map[string]int{}, map[string]int{} // ConfigMap GETs by path
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") {
				mu.Lock()
				gets[req.URL.Path]++
				if req.URL.Query().Get("watch") == "true" {
					watches[req.URL.Path]++
				}
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	mgr := newManager(t, c, cached[0], manager.Options{Informers: informer.Options{Namespaces: cached}})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if _, err := mgr.AddController("three", records(rec), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(cached), other)
	for _, ns := range all {
		createConfigMap(t, ns, "before", nil, nil)
	}
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	for _, ns := range all {
		createConfigMap(t, ns, "after", nil, nil)
	}
	var want []string
	for _, ns := range cached {
		want = append(want, ns+"/after", ns+"/before")
	}
	slices.Sort(want)
	reconciled := func() []string {
		var out []string
		for _, c := range rec.all() {
			if k := c.req.Namespace + "/" + c.req.Name; !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	eventually(t, waitTimeout, func() bool {
		got := reconciled()
		return !slices.ContainsFunc(want, func(k string) bool { return !slices.Contains(got, k) })
	}, "reconciles of %q (reconciled %v)", want, later(func() any { return reconciled() }))
	never(t, 2*time.Second, func() bool {
		return slices.ContainsFunc(rec.all(), func(c call) bool { return c.req.Namespace == other })
	}, "a reconcile of a ConfigMap in the uncached namespace %s", other)
	if got := reconciled(); !slices.Equal(got, want) {
		t.Errorf("reconciled %q, want exactly %q", got, want)
	}

	keys := func(list []*corev1.ConfigMap, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cm := range list {
			out = append(out, cm.Namespace+"/"+cm.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := keys(cms.Lister().List(nil)); !slices.Equal(got, want) {
		t.Errorf("Lister.List = %q, want %q", got, want)
	}
	if got, wantOne := keys(cms.Lister().ListInNamespace(cached[1], nil)), []string{cached[1] + "/after", cached[1] + "/before"}; !slices.Equal(got, wantOne) {
		t.Errorf("ListInNamespace(%s) = %q, want %q", cached[1], got, wantOne)
	}
	if got, err := cms.Lister().Get(cached[2], "after"); err != nil || got.Namespace != cached[2] {
		t.Errorf("Lister.Get(%s, after) = %v, %v", cached[2], got, err)
	}
	if _, err := cms.Lister().Get(other, "before"); !errors.Is(err, informer.ErrNamespaceNotCached) {
		t.Errorf("Lister.Get in the uncached namespace: %v, want ErrNamespaceNotCached", err)
	}
	if _, err := cms.Lister().ListInNamespace(other, nil); !errors.Is(err, informer.ErrNamespaceNotCached) {
		t.Errorf("Lister.ListInNamespace of the uncached namespace: %v, want ErrNamespaceNotCached", err)
	}

	mu.Lock()
	defer mu.Unlock()
	t.Logf("ConfigMap GETs by path %v, of which watches %v", gets, watches)
	for path := range gets {
		if !slices.ContainsFunc(cached, func(ns string) bool { return path == "/api/v1/namespaces/"+ns+"/configmaps" }) {
			t.Errorf("the manager listed or watched %s, outside the cached namespaces", path)
		}
	}
	for _, ns := range cached {
		if watches["/api/v1/namespaces/"+ns+"/configmaps"] == 0 {
			t.Errorf("no watch of the ConfigMaps of %s", ns)
		}
	}
}

// TestControllerAddedAfterRunAndRemoved: a manager runs with no
// controllers; a ConfigMap informer and a controller added then reconcile
// what exists and what is created. RemoveController stops both: the
// informer leaves Declared, its Lister fails with ErrRemoved, and a
// ConfigMap created afterwards, which a new controller on a new informer
// does see, never reaches the removed one. Once Run returns, no goroutine
// is left behind.
func TestControllerAddedAfterRunAndRemoved(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "old", nil, nil)
	baseline := goleak.IgnoreCurrent()
	mgr := newManager(t, cfg, ns, manager.Options{})
	r := start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager with no controllers to be ready")
	if got := mgr.Cache().Declared(); len(got) != 0 {
		t.Fatalf("Declared() = %q before any declaration", got)
	}

	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	late, witness := &recorder{}, &recorder{}
	if _, err := mgr.AddController("late", records(late), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	if !cms.HasSynced() {
		t.Error("AddController returned before the informer of its watch synced")
	}
	eventually(t, waitTimeout, func() bool { return late.count(key(ns, "old")) > 0 }, "the late controller to reconcile the existing ConfigMap")
	createConfigMap(t, ns, "new", nil, nil)
	eventually(t, waitTimeout, func() bool { return late.count(key(ns, "new")) > 0 }, "the late controller to reconcile a new ConfigMap")

	if err := mgr.RemoveController("late"); err != nil {
		t.Fatal(err)
	}
	if got := mgr.Cache().Declared(); slices.Contains(got, cms.Name()) {
		t.Errorf("after RemoveController, Declared() = %q still lists %s", got, cms.Name())
	}
	if _, err := cms.Lister().Get(ns, "old"); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("Lister.Get of the removed informer: %v, want ErrRemoved", err)
	}
	if _, err := cms.Lister().List(nil); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("Lister.List of the removed informer: %v, want ErrRemoved", err)
	}

	again, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AddController("witness", records(witness), manager.ControllerOptions{}, manager.Watch{Source: again}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "after", nil, nil)
	eventually(t, waitTimeout, func() bool { return witness.count(key(ns, "after")) > 0 }, "the witness controller to reconcile the ConfigMap created after the removal")
	never(t, time.Second, func() bool { return late.count(key(ns, "after")) > 0 }, "a reconcile by the removed controller")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	goleak.VerifyNone(t, baseline)
}

// TestCRDInstalledAfterStart: an informer declared with WhenServed for a
// kind whose CRD is absent does not hold the manager back; the CRD,
// installed 5s after Run started, is found by discovery and its first
// object reconciled without a restart.
func TestCRDInstalledAfterStart(t *testing.T) {
	gv := schema.GroupVersion{Group: "runtime.e2e.ctrlkit.io", Version: "v1"}
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: sprocketScheme(t, gv), Informers: informer.Options{
		ByType:            map[runtime.Object]informer.TypeOptions{&Sprocket{}: {WhenServed: true}},
		DiscoveryInterval: 500 * time.Millisecond,
	}})
	sprockets, err := informer.For[*Sprocket](mgr.Cache())
	if err != nil {
		t.Fatalf("For[*Sprocket] with WhenServed, CRD absent: %v", err)
	}
	rec := sprocketController(t, mgr, sprockets)
	started := time.Now()
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready without the CRD")
	if sprockets.Served() {
		t.Fatal("Served() is true before the CRD is installed")
	}
	if _, err := sprockets.Lister().Get(ns, "s"); !apierrors.IsNotFound(err) {
		t.Errorf("Lister.Get before the CRD: %v, want NotFound", err)
	}

	// The scenario: the CRD arrives 5s after the manager started.
	select {
	case <-time.After(time.Until(started.Add(5 * time.Second))):
	case <-t.Context().Done():
		return
	}
	if sprockets.Served() {
		t.Fatal("Served() became true with no CRD installed")
	}
	established := installCRD(t, gv)
	eventually(t, waitTimeout, sprockets.Served, "the informer to find the CRD's API served")
	servedAt := time.Now()
	eventually(t, waitTimeout, sprockets.HasSynced, "the informer to sync once the CRD is served")
	synced := time.Now()
	s := key(ns, "s")
	created := createSprocket(t, gv, ns, "s", 3)
	eventually(t, waitTimeout, func() bool { return rec.sawNote(s, "teeth=3") }, "a reconcile of the Sprocket created after its CRD (notes %v)", rec.notesLater(s))
	first := rec.of(s)[0].at
	// Served → synced includes the API server's Retry-After (1s) while the
	// new resource's watch cache initializes, when the informer is quick.
	t.Logf("CRD Established → Served(): %v (discovery interval 500ms), → HasSynced(): %v, → first reconcile: %v; Sprocket create returned → its reconcile: %v",
		servedAt.Sub(established), synced.Sub(established), first.Sub(established), first.Sub(created))
}

// TestCRDDeletedAndRecreated: the CRD a running informer watches is
// deleted: the controller gets a reconcile for its object, which the
// Lister no longer has, and the informer stops with one log line, no error
// lines and no reflector retry spam; the CRD is recreated and a new object
// is reconciled without a restart.
func TestCRDDeletedAndRecreated(t *testing.T) {
	gv := schema.GroupVersion{Group: "recreate.e2e.ctrlkit.io", Version: "v1"}
	ns := newNamespace(t)
	installCRD(t, gv)
	logs := &logLines{}
	mgr := newManager(t, cfg, ns, manager.Options{
		Logger: logr.New(&recordingSink{LogSink: testLogger(t).GetSink(), lines: logs}),
		Scheme: sprocketScheme(t, gv),
		Informers: informer.Options{
			DiscoveryInterval: 500 * time.Millisecond,
		},
	})
	sprockets, err := informer.For[*Sprocket](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := sprocketController(t, mgr, sprockets)
	start(t, mgr)
	old, fresh := key(ns, "old"), key(ns, "fresh")
	createSprocket(t, gv, ns, "old", 1)
	eventually(t, waitTimeout, func() bool { return rec.sawNote(old, "teeth=1") }, "a reconcile of Sprocket old (notes %v)", rec.notesLater(old))

	_, from := logs.since(0)
	if err := dyn.Resource(crdGVR).Delete(t.Context(), "sprockets."+gv.Group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool {
		_, err := dyn.Resource(crdGVR).Get(t.Context(), "sprockets."+gv.Group, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && !served(gv)
	}, "the CRD to be gone, and from discovery")
	eventually(t, waitTimeout, func() bool { return !sprockets.Served() }, "the informer to report Served() == false")
	// The CRD's cleanup finalizer deletes the Sprockets before the CRD
	// goes, so this delete usually comes by the watch (objectsGone=0 in
	// the "no longer serves" line), not from the informer's stop.
	eventually(t, waitTimeout, func() bool { return rec.sawNote(old, "absent") }, "a reconcile of Sprocket old that finds it gone (notes %v)", rec.notesLater(old))
	if _, err := sprockets.Lister().Get(ns, "old"); !apierrors.IsNotFound(err) {
		t.Errorf("Lister.Get of the Sprocket of the deleted CRD: %v, want NotFound", err)
	}

	installCRD(t, gv)
	createSprocket(t, gv, ns, "fresh", 2)
	eventually(t, waitTimeout, func() bool { return rec.sawNote(fresh, "teeth=2") }, "a reconcile of Sprocket fresh after the CRD came back (notes %v)", rec.notesLater(fresh))
	if !sprockets.Served() {
		t.Error("Served() is false after the CRD came back")
	}

	window, _ := logs.since(from)
	var about, errs, reflector []string
	stopped, restarted := 0, 0
	for _, l := range window {
		switch {
		case l.err:
			errs = append(errs, l.text)
		case strings.Contains(l.text, "Failed to watch"), strings.Contains(strings.ToLower(l.text), "failed to list"):
			reflector = append(reflector, l.text)
		case l.level == 0 && strings.Contains(l.text, gv.Group):
			about = append(about, l.text)
			stopped += strings.Count(l.msg, "no longer serves the informer's resource")
			restarted += strings.Count(l.msg, "The API server serves the informer's resource")
		}
	}
	t.Logf("delete → recreate window: %d log lines at any verbosity, %d at V(0) about %s, %d errors, %d reflector list/watch failures",
		len(window), len(about), gv.Group, len(errs), len(reflector))
	for _, l := range about {
		t.Logf("  about the resource: %s", l)
	}
	if len(about) > 5 {
		t.Errorf("%d V(0) log lines about the resource, want at most 5", len(about))
	}
	if stopped != 1 || restarted != 1 {
		t.Errorf("%d \"no longer serves\" and %d \"serves ... starting\" lines, want one of each", stopped, restarted)
	}
	if len(errs) > 0 || len(reflector) > 0 {
		t.Errorf("error lines %q and reflector failures %q, want none", errs, reflector)
	}
}

// Sprocket is a custom resource whose CRD the tests of this file install
// and delete themselves, each in a group of its own.
type Sprocket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Teeth int64 `json:"teeth,omitempty"`
	} `json:"spec,omitempty"`
}

// SprocketList is a list of Sprockets.
type SprocketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sprocket `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (in *Sprocket) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *SprocketList) DeepCopyObject() runtime.Object {
	out := *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Sprocket, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopyObject().(*Sprocket)
	}
	return &out
}

// records returns a Reconciler that records each call in rec.
func records(rec *recorder) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		rec.add(req, time.Now(), "")
		return reconcile.Result{}, nil
	})
}

// sprocketScheme returns client-go's scheme with Sprocket in gv.
func sprocketScheme(t testing.TB, gv schema.GroupVersion) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(gv, &Sprocket{}, &SprocketList{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

// sprocketController adds a controller that records, per key, "teeth=N"
// when the Lister has the Sprocket and "absent" when it has not.
func sprocketController(t testing.TB, mgr *manager.Manager, sprockets *informer.Informer[*Sprocket]) *recorder {
	t.Helper()
	rec := &recorder{}
	_, err := mgr.AddController("sprockets", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		note := "absent"
		s, err := sprockets.Lister().Get(req.Namespace, req.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			note = "lister error: " + err.Error()
		default:
			note = fmt.Sprintf("teeth=%d", s.Spec.Teeth)
		}
		rec.add(req, time.Now(), note)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: sprockets})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// sprocketCRD is the CRD of Sprocket; GROUP is replaced by its group.
const sprocketCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.GROUP
spec:
  group: GROUP
  names: {kind: Sprocket, listKind: SprocketList, plural: sprockets, singular: sprocket}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the Sprocket CRD of gv and waits until it is
// Established and in discovery; it returns when it saw it Established. A
// cleanup deletes it.
func installCRD(t testing.TB, gv schema.GroupVersion) time.Time {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(sprocketCRD, "GROUP", gv.Group)), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", u.GetName(), err)
	}
	t.Cleanup(func() {
		err := dyn.Resource(crdGVR).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting CRD %s: %v", u.GetName(), err)
		}
	})
	var established time.Time
	eventually(t, waitTimeout, func() bool {
		got, err := dyn.Resource(crdGVR).Get(t.Context(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if slices.ContainsFunc(conds, func(c any) bool {
			return c.(map[string]any)["type"] == "Established" && c.(map[string]any)["status"] == "True"
		}) {
			established = time.Now()
		}
		return !established.IsZero()
	}, "CRD %s to be Established", u.GetName())
	eventually(t, waitTimeout, func() bool { return served(gv) }, "discovery to serve %s", u.GetName())
	return established
}

// served reports whether discovery lists the sprockets resource of gv.
func served(gv schema.GroupVersion) bool {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gv.String())
	return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "sprockets" })
}

// createSprocket creates namespace/name through the admin dynamic client,
// retrying while the just installed CRD is not yet served, and returns
// when the create returned.
func createSprocket(t testing.TB, gv schema.GroupVersion, namespace, name string, teeth int64) time.Time {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(),
		"kind":       "Sprocket",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"teeth": teeth},
	}}
	var err error
	eventually(t, waitTimeout, func() bool {
		_, err = dyn.Resource(gv.WithResource("sprockets")).Namespace(namespace).Create(t.Context(), u, metav1.CreateOptions{})
		return err == nil || !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err)
	}, "the API server to accept Sprockets (last error %v)", later(func() any { return err }))
	if err != nil {
		t.Fatalf("creating Sprocket %s/%s: %v", namespace, name, err)
	}
	return time.Now()
}

// logLine is one line a recordingSink saw.
type logLine struct {
	level int  // V level of an Info line
	err   bool // an Error line
	msg   string
	text  string // msg with every key and value
}

// logLines records log lines; safe for concurrent use.
type logLines struct {
	mu    sync.Mutex
	lines []logLine
}

func (l *logLines) add(line logLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// since returns the lines from the i-th on, and how many lines there are.
func (l *logLines) since(i int) ([]logLine, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines[i:]), len(l.lines)
}

// recordingSink records every line, at every verbosity, in lines, and
// passes those its LogSink enables on to it.
type recordingSink struct {
	logr.LogSink
	lines  *logLines
	prefix string // names and values added with WithName and WithValues
}

func (s *recordingSink) Enabled(int) bool { return true }

func (s *recordingSink) Info(level int, msg string, kv ...any) {
	s.lines.add(logLine{level: level, msg: msg, text: fmt.Sprintf("%s%s %v", s.prefix, msg, kv)})
	if s.LogSink.Enabled(level) {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	s.lines.add(logLine{err: true, msg: msg, text: fmt.Sprintf("%s%s %v error=%v", s.prefix, msg, kv, err)})
	s.LogSink.Error(err, msg, kv...)
}

func (s *recordingSink) WithValues(kv ...any) logr.LogSink {
	return &recordingSink{LogSink: s.LogSink.WithValues(kv...), lines: s.lines, prefix: fmt.Sprintf("%s%v ", s.prefix, kv)}
}

func (s *recordingSink) WithName(name string) logr.LogSink {
	return &recordingSink{LogSink: s.LogSink.WithName(name), lines: s.lines, prefix: s.prefix + name + ": "}
}
