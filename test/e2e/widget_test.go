package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// The e2e.ctrlkit.io/v1 API: Widget has a CRD in testdata/crds; Gadget is
// registered in the scheme but the server does not serve it.
var (
	e2eGV     = schema.GroupVersion{Group: "e2e.ctrlkit.io", Version: "v1"}
	widgetGVR = e2eGV.WithResource("widgets")
)

// Widget is the Go type of the Widget custom resource, written by hand as
// an operator without generated code would: no clientset, no informers.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec,omitempty"`
	Status            WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	Size  int32  `json:"size"`
	Color string `json:"color,omitempty"`
}

// WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	ObservedSize int32 `json:"observedSize,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyInto copies in into out.
func (in *Widget) DeepCopyInto(out *Widget) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

// DeepCopy returns a deep copy of in.
func (in *Widget) DeepCopy() *Widget {
	if in == nil {
		return nil
	}
	out := new(Widget)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Widget) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out.
func (in *WidgetList) DeepCopyInto(out *WidgetList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Widget, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *WidgetList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(WidgetList)
	in.DeepCopyInto(out)
	return out
}

// Gadget is in the scheme, but no CRD makes the server serve it.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (in *Gadget) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// newScheme returns a scheme with client-go's built-in types and the
// e2e.ctrlkit.io/v1 types.
func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(e2eGV, &Widget{}, &WidgetList{}, &Gadget{})
	metav1.AddToGroupVersion(s, e2eGV)
	return s
}

// widgetObject is a Widget as the dynamic client writes it.
func widgetObject(namespace, name string, size int64, color string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": e2eGV.String(),
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"size": size, "color": color},
	}}
}

// TestCustomResourceThroughGenericLister: a CRD with a hand-written Go type
// and no generated clientset is watched with informer.For; Reconcile reads
// typed Widgets from Lister[*Widget], and spec and status updates arrive.
// Built-in types keep working with the same scheme.
func TestCustomResourceThroughGenericLister(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if got := widgets.GroupVersionResource(); got != widgetGVR {
		t.Errorf("Widget informer watches %v, want %v", got, widgetGVR)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatalf("a built-in type with the custom scheme: %v", err)
	}
	rec := &recorder{}
	_, err = mgr.AddController("widgets", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		note := "absent"
		w, err := widgets.Lister().Get(req.Namespace, req.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			note = "lister error: " + err.Error()
		default:
			note = fmt.Sprintf("%s size=%d color=%s observed=%d managedFields=%d",
				w.GroupVersionKind().Kind, w.Spec.Size, w.Spec.Color, w.Status.ObservedSize, len(w.ManagedFields))
		}
		rec.add(req, time.Now(), note)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: widgets})
	if err != nil {
		t.Fatal(err)
	}
	cmSeen := &recorder{}
	_, err = mgr.AddController("configmaps", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cmSeen.add(req, time.Now(), "")
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)

	client := mgr.Dynamic().Resource(widgetGVR).Namespace(ns)
	if _, err := client.Create(t.Context(), widgetObject(ns, "w", 3, "red"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := key(ns, "w")
	wait := func(note string) {
		t.Helper()
		eventually(t, waitTimeout, func() bool { return rec.sawNote(w, note) }, "Reconcile of %s to see %q (notes %v)", w, note, rec.notesLater(w))
	}
	wait("Widget size=3 color=red observed=0 managedFields=0")

	u, err := client.Get(t.Context(), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(5), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "blue", "spec", "color"); err != nil {
		t.Fatal(err)
	}
	if u, err = client.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("Widget size=5 color=blue observed=0 managedFields=0")

	if err := unstructured.SetNestedField(u.Object, int64(5), "status", "observedSize"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("Widget size=5 color=blue observed=5 managedFields=0")

	if err := client.Delete(t.Context(), "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("absent")

	createConfigMap(t, ns, "plain", nil, nil)
	eventually(t, waitTimeout, func() bool { return cmSeen.count(key(ns, "plain")) > 0 }, "a ConfigMap to reconcile next to Widgets")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
}

// TestEventsOnCustomResource: the manager's EventRecorder, with the custom
// scheme, writes Events about Widgets to the API server; Run shuts the
// event broadcaster down, leaving no goroutine behind.
func TestEventsOnCustomResource(t *testing.T) {
	ns := newNamespace(t)
	baseline := goleak.IgnoreCurrent()
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	events := mgr.EventRecorder("widget-controller")
	_, err = mgr.AddController("widget-events", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		w, err := widgets.Lister().Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		events.Eventf(w, corev1.EventTypeNormal, "Observed", "size %d", w.Spec.Size)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: widgets})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	if _, err := mgr.Dynamic().Resource(widgetGVR).Namespace(ns).Create(t.Context(), widgetObject(ns, "w", 3, "red"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []string
	eventually(t, waitTimeout, func() bool {
		list, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Logf("listing events: %v", err)
			return false
		}
		got = got[:0]
		for _, e := range list.Items {
			got = append(got, fmt.Sprintf("%s %s/%s %s %s %q from %s", e.Type, e.InvolvedObject.APIVersion, e.InvolvedObject.Kind,
				e.InvolvedObject.Name, e.Reason, e.Message, e.Source.Component))
		}
		return slices.Contains(got, `Normal e2e.ctrlkit.io/v1/Widget w Observed "size 3" from widget-controller`)
	}, "the Observed event about Widget w (events %v)", later(func() any { return got }))

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	goleak.VerifyNone(t, baseline)
}

// TestGenerationChangedIgnoresStatusWrites: on a CRD with a status
// subresource, informer.GenerationChanged passes creates and spec changes
// but drops status-only writes, so a controller's own status updates do not
// trigger it again. Predicates that record what they see, placed around
// it, show the verdict on each watch event.
func TestGenerationChangedIgnoresStatusWrites(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu           sync.Mutex
		seen, passed []string // "<event> rv=<resourceVersion>"
	)
	record := func(into *[]string) informer.Predicate {
		return func(ev informer.Event) bool {
			mu.Lock()
			defer mu.Unlock()
			*into = append(*into, fmt.Sprintf("%s rv=%s", ev.Type, ev.Object.GetResourceVersion()))
			return true
		}
	}
	has := func(list *[]string, s string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(*list, s)
		}
	}
	rec := &recorder{}
	_, err = mgr.AddController("spec-only", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		note := "absent"
		if w, err := widgets.Lister().Get(req.Namespace, req.Name); err == nil {
			note = fmt.Sprintf("size=%d observed=%d", w.Spec.Size, w.Status.ObservedSize)
		}
		rec.add(req, time.Now(), note)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{
		Source:     widgets,
		Predicates: []informer.Predicate{record(&seen), informer.GenerationChanged(), record(&passed)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)

	client := mgr.Dynamic().Resource(widgetGVR).Namespace(ns)
	u, err := client.Create(t.Context(), widgetObject(ns, "w", 3, "red"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := key(ns, "w")
	eventually(t, waitTimeout, func() bool { return rec.sawNote(w, "size=3 observed=0") }, "the create to reach Reconcile (notes %v)", rec.notesLater(w))

	if err := unstructured.SetNestedField(u.Object, int64(3), "status", "observedSize"); err != nil {
		t.Fatal(err)
	}
	statusWrite, err := client.UpdateStatus(t.Context(), u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(statusWrite.Object, int64(4), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	specWrite, err := client.Update(t.Context(), statusWrite, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	statusEv, specEv := "update rv="+statusWrite.GetResourceVersion(), "update rv="+specWrite.GetResourceVersion()
	// One handler sees events in order: once the spec write has passed
	// every predicate, the status write's verdict is in.
	eventually(t, waitTimeout, has(&passed, specEv), "the spec write to pass GenerationChanged")
	if !has(&seen, statusEv)() {
		t.Fatalf("the status write (%s) never reached the predicates; seen %v", statusEv, seen)
	}
	if has(&passed, statusEv)() {
		t.Errorf("GenerationChanged passed the status-only write %s; passed %v", statusEv, passed)
	}
	eventually(t, waitTimeout, func() bool { return rec.sawNote(w, "size=4 observed=3") }, "the spec write to reach Reconcile (notes %v)", rec.notesLater(w))

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if notes := rec.notes(w); !slices.Equal(notes, []string{"size=3 observed=0", "size=4 observed=3"}) {
		t.Errorf("Reconcile saw %q, want the create and the spec write only", notes)
	}
}
