package main

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// These unit tests call Reconcile directly against ctrlkit's in-memory API
// server (package fake), whose listers see every write at once; they use
// nothing of the envtest that TestMain starts for TestOperator.

const testNS = "team-a"

// defaultsKey is the key of testNS's defaults ConfigMap.
var defaultsKey = types.NamespacedName{Namespace: testNS, Name: ConfigMapName}

// newReconciler returns a Reconciler whose listers and client work on a
// fake API server holding objs, the fake, and the Reconciler's event
// recorder.
func newReconciler(t *testing.T, objs ...runtime.Object) (*Reconciler, *fake.Cluster, *record.FakeRecorder) {
	t.Helper()
	cluster, err := fake.New(fake.Options{Scheme: kubescheme.Scheme, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Scheme: kubescheme.Scheme, Mapper: cluster.RESTMapper(), FieldManager: "nsdefaults"})
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := fake.Lister[*corev1.Namespace](cluster)
	if err != nil {
		t.Fatal(err)
	}
	configMaps, err := fake.Lister[*corev1.ConfigMap](cluster)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(100)
	return &Reconciler{Namespaces: namespaces, ConfigMaps: configMaps, Client: c, Events: events}, cluster, events
}

func reconcileNS(t *testing.T, r *Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Name: testNS}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

// writesOf is each write the fake answered, as "verb resource namespace/name".
func writesOf(cluster *fake.Cluster) []string {
	var out []string
	for _, w := range cluster.Writes() {
		s := w.Verb + " " + w.Resource.Resource + " " + w.Namespace + "/" + w.Name
		if w.Err != nil {
			s += " -> " + string(apierrors.ReasonForError(w.Err))
		}
		out = append(out, s)
	}
	return out
}

// drain returns the events recorded so far, each "type reason message".
func drain(events *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// namespace is testNS with labels.
func namespace(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, UID: "5e7e5e7e-0000-4000-8000-000000000001", Labels: labels}}
}

var served = map[string]string{Label: "true"}

// defaults is testNS's defaults ConfigMap holding data, controlled by ns.
func defaults(ns *corev1.Namespace, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: ConfigMapName,
			Labels:          map[string]string{"kept": "yes"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ns, corev1.SchemeGroupVersion.WithKind("Namespace"))},
		},
		Data: data,
	}
}

// checkDefaults checks that the stored defaults ConfigMap holds the
// desired data and is controlled by ns.
func checkDefaults(t *testing.T, cluster *fake.Cluster, ns *corev1.Namespace) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := cluster.Get(defaultsKey, cm); err != nil {
		t.Fatalf("no defaults ConfigMap: %v", err)
	}
	if !maps.Equal(cm.Data, desiredData) {
		t.Errorf("data %v, want %v", cm.Data, desiredData)
	}
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.UID != ns.UID || ref.Kind != "Namespace" || ref.APIVersion != "v1" || ref.Name != testNS || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v, want Namespace %s (UID %s)", ref, testNS, ns.UID)
	}
	return cm
}

// TestReconcileCreates: a labelled namespace gets its ConfigMap.
func TestReconcileCreates(t *testing.T) {
	ns := namespace(served)
	r, cluster, events := newReconciler(t, ns)
	reconcileNS(t, r)
	if got, want := writesOf(cluster), []string{"create configmaps team-a/defaults"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	checkDefaults(t, cluster, ns)
	if got, want := drain(events), []string{"Normal Created created ConfigMap defaults"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	// Done: a second Reconcile finds the ConfigMap in shape.
	cluster.ResetWrites()
	reconcileNS(t, r)
	if got := writesOf(cluster); len(got) != 0 {
		t.Errorf("writes of a second Reconcile %q, want none", got)
	}
}

// TestReconcileRepairs: an edited ConfigMap gets its data back, and keeps
// the rest.
func TestReconcileRepairs(t *testing.T) {
	ns := namespace(served)
	r, cluster, events := newReconciler(t, ns, defaults(ns, map[string]string{"log-level": "debug", "owner": "nsdefaults", "extra": "x"}))
	before := &corev1.ConfigMap{}
	if err := cluster.Get(defaultsKey, before); err != nil {
		t.Fatal(err)
	}
	reconcileNS(t, r)
	if got, want := writesOf(cluster), []string{"update configmaps team-a/defaults"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	cm := checkDefaults(t, cluster, ns)
	if cm.UID != before.UID || cm.Labels["kept"] != "yes" {
		t.Errorf("ConfigMap uid %s labels %v, want the same object (uid %s) with its labels kept", cm.UID, cm.Labels, before.UID)
	}
	if got, want := drain(events), []string{"Normal Repaired restored ConfigMap defaults"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestReconcileLeavesAlone: nothing to do writes nothing.
func TestReconcileLeavesAlone(t *testing.T) {
	terminating := namespace(served)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
	terminating.Finalizers = []string{"example.com/hold"}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
	}{
		{"unlabelled", []runtime.Object{namespace(nil)}},
		{"labelled false", []runtime.Object{namespace(map[string]string{Label: "false"})}},
		{"terminating", []runtime.Object{terminating}},
		{"namespace gone", nil},
		{"ConfigMap in shape", []runtime.Object{namespace(served), defaults(namespace(served), maps.Clone(desiredData))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cluster, events := newReconciler(t, tc.objs...)
			reconcileNS(t, r)
			if got := writesOf(cluster); len(got) != 0 {
				t.Errorf("writes %q, want none", got)
			}
			if got := drain(events); len(got) != 0 {
				t.Errorf("events %q, want none", got)
			}
		})
	}
}
