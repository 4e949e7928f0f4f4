package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// These unit tests call Reconcile directly against ctrlkit's in-memory API
// server (package fake), whose listers see every write at once; they use
// nothing of the envtest that TestMain starts for the tests in
// main_test.go. The fake's server-side apply is a JSON merge patch with no
// field ownership, so they check what the operator sends and the objects
// that result, not apply semantics: main_test.go covers those.

// siteKey is the Website the tests reconcile.
var siteKey = types.NamespacedName{Namespace: "default", Name: "shop"}

// routeKey is the key of its route ConfigMap.
var routeKey = types.NamespacedName{Namespace: RoutesNamespace, Name: "default.shop"}

// testHarness is a Reconciler working on a fake API server, with a fake
// event recorder.
type testHarness struct {
	r       *Reconciler
	cluster *fake.Cluster
	events  *record.FakeRecorder
}

// newHarness returns a Reconciler whose listers and client work on a fake
// API server holding objs.
func newHarness(t *testing.T, objs ...runtime.Object) *testHarness {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := fake.New(fake.Options{Scheme: scheme, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Scheme: scheme, Mapper: cluster.RESTMapper(), FieldManager: Name})
	if err != nil {
		t.Fatal(err)
	}
	websites, err := fake.Lister[*v1alpha1.Website](cluster)
	if err != nil {
		t.Fatal(err)
	}
	deployments, err := fake.Lister[*appsv1.Deployment](cluster)
	if err != nil {
		t.Fatal(err)
	}
	services, err := fake.Lister[*corev1.Service](cluster)
	if err != nil {
		t.Fatal(err)
	}
	configMaps, err := fake.Lister[*corev1.ConfigMap](cluster)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(100)
	return &testHarness{
		r: &Reconciler{
			Websites: websites, Deployments: deployments, Services: services, ConfigMaps: configMaps,
			Client: c, Events: events,
		},
		cluster: cluster,
		events:  events,
	}
}

func (h *testHarness) reconcile(t *testing.T) error {
	t.Helper()
	_, err := h.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: siteKey})
	return err
}

// takeWrites returns the writes the fake answered since the last call, as
// "verb resource[/subresource]", followed by " -> Reason" for a refused
// one, and the requests themselves.
func (h *testHarness) takeWrites() ([]string, []fake.Request) {
	ws := h.cluster.Writes()
	h.cluster.ResetWrites()
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Verb + " " + w.Resource.Resource
		if w.Subresource != "" {
			out[i] += "/" + w.Subresource
		}
		if w.Err != nil {
			out[i] += " -> " + string(apierrors.ReasonForError(w.Err))
		}
	}
	return out, ws
}

// takeEvents drains the events recorded since the last call, each
// "type reason message".
func (h *testHarness) takeEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// reasons is the "type reason" of each event.
func reasons(events []string) []string {
	out := make([]string, len(events))
	for i, e := range events {
		f := strings.Fields(e)
		if len(f) > 2 {
			f = f[:2]
		}
		out[i] = strings.Join(f, " ")
	}
	return out
}

func newWebsite() *v1alpha1.Website {
	return &v1alpha1.Website{
		ObjectMeta: metav1.ObjectMeta{Namespace: siteKey.Namespace, Name: siteKey.Name},
		Spec:       v1alpha1.WebsiteSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2), Port: 8080},
	}
}

// getWebsite reads the stored Website.
func (h *testHarness) getWebsite(t *testing.T) *v1alpha1.Website {
	t.Helper()
	s := &v1alpha1.Website{}
	if err := h.cluster.Get(siteKey, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkStatus checks that s's status describes its generation with Ready
// = ready for reason, Progressing the opposite, and available replicas.
func checkStatus(t *testing.T, s *v1alpha1.Website, ready metav1.ConditionStatus, reason string, available int32) {
	t.Helper()
	progressing := metav1.ConditionTrue
	if ready == metav1.ConditionTrue {
		progressing = metav1.ConditionFalse
	}
	r := objects.FindCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	p := objects.FindCondition(s.Status.Conditions, v1alpha1.ConditionProgressing)
	if s.Status.ObservedGeneration != s.Generation {
		t.Errorf("status.observedGeneration %d, want generation %d", s.Status.ObservedGeneration, s.Generation)
	}
	if want := "http://shop.default.svc:8080"; s.Status.URL != want {
		t.Errorf("status.url %q, want %q", s.Status.URL, want)
	}
	if s.Status.AvailableReplicas != available {
		t.Errorf("status.availableReplicas %d, want %d", s.Status.AvailableReplicas, available)
	}
	if r == nil || r.Status != ready || r.Reason != reason || r.ObservedGeneration != s.Generation || r.LastTransitionTime.IsZero() {
		t.Errorf("Ready condition %+v, want %s (%s) for generation %d", r, ready, reason, s.Generation)
	}
	if p == nil || p.Status != progressing || p.ObservedGeneration != s.Generation {
		t.Errorf("Progressing condition %+v, want %s for generation %d", p, progressing, s.Generation)
	}
	if len(s.Status.Conditions) != 2 {
		t.Errorf("conditions %+v, want Ready and Progressing only", s.Status.Conditions)
	}
}

// TestReconcileWebsiteLifecycle follows a Website from creation through an
// idle resync, a completed rollout and a spec change.
func TestReconcileWebsiteLifecycle(t *testing.T) {
	h := newHarness(t, newWebsite())

	// A new Website: the finalizer first, then the children, then the
	// status.
	if err := h.reconcile(t); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	got, ws := h.takeWrites()
	want := []string{"patch websites", "apply deployments", "apply services", "apply configmaps", "apply websites/status"}
	if !slices.Equal(got, want) {
		t.Fatalf("writes %q, want %q", got, want)
	}
	if p := ws[0]; p.PatchType != types.MergePatchType || !strings.Contains(string(p.Body), `"resourceVersion"`) {
		t.Errorf("finalizer patch %s %s, want a merge patch carrying the resourceVersion read", p.PatchType, p.Body)
	}
	if a := ws[3]; a.Namespace != RoutesNamespace || a.Name != routeKey.Name {
		t.Errorf("route applied as %s/%s, want %s", a.Namespace, a.Name, routeKey)
	}
	for _, a := range ws[1:] {
		if !a.Force || a.FieldManager != Name {
			t.Errorf("%s %s: force %v, field manager %q; want a forced apply by %s", a.Verb, a.Resource.Resource, a.Force, a.FieldManager, Name)
		}
	}

	s := h.getWebsite(t)
	if !objects.HasFinalizer(s, Finalizer) {
		t.Errorf("finalizers %v, want %s", s.Finalizers, Finalizer)
	}
	checkStatus(t, s, metav1.ConditionFalse, "RollingOut", 0)

	dep := &appsv1.Deployment{}
	if err := h.cluster.Get(siteKey, dep); err != nil {
		t.Fatalf("no Deployment: %v", err)
	}
	if err := controlledBy(dep, s); err != nil {
		t.Errorf("Deployment: %v", err)
	}
	c := dep.Spec.Template.Spec.Containers
	if ptr.Deref(dep.Spec.Replicas, -1) != 2 || len(c) != 1 || c[0].Image != "nginx:1.27" || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != 8080 || c[0].Ports[0].Name != "http" {
		t.Errorf("Deployment replicas %v containers %+v, want 2 replicas of nginx:1.27 serving http on 8080", dep.Spec.Replicas, c)
	}
	if dep.Spec.Selector == nil || !labels.SelectorFromSet(dep.Spec.Selector.MatchLabels).Matches(labels.Set(dep.Spec.Template.Labels)) ||
		dep.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != siteKey.Name {
		t.Errorf("Deployment selector %v, template labels %v: want a selector of instance=%s that selects the template", dep.Spec.Selector, dep.Spec.Template.Labels, siteKey.Name)
	}
	if dep.Labels["app.kubernetes.io/managed-by"] != Name {
		t.Errorf("Deployment labels %v, want managed-by=%s", dep.Labels, Name)
	}

	svc := &corev1.Service{}
	if err := h.cluster.Get(siteKey, svc); err != nil {
		t.Fatalf("no Service: %v", err)
	}
	if err := controlledBy(svc, s); err != nil {
		t.Errorf("Service: %v", err)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 8080 || p[0].TargetPort != intstr.FromString("http") ||
		!labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service ports %+v selector %v, want 8080 to http on the Deployment's pods %v", p, svc.Spec.Selector, dep.Spec.Template.Labels)
	}

	route := &corev1.ConfigMap{}
	if err := h.cluster.Get(routeKey, route); err != nil {
		t.Fatalf("no route: %v", err)
	}
	if route.Data["url"] != "http://shop.default.svc:8080" || route.Annotations[RouteAnnotation] != "default/shop" || len(route.OwnerReferences) != 0 {
		t.Errorf("route data %v annotations %v owners %v, want the URL, the Website's name and no owner", route.Data, route.Annotations, route.OwnerReferences)
	}

	events := h.takeEvents()
	if got, want := reasons(events), []string{"Normal Created", "Normal Created", "Normal Created", "Normal RollingOut"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want reasons %q", events, want)
	} else {
		for i, child := range []string{"Deployment default/shop", "Service default/shop", "route ConfigMap " + routeKey.String()} {
			if !strings.HasSuffix(events[i], " "+child) {
				t.Errorf("event %q, want it to name %s", events[i], child)
			}
		}
	}

	// Nothing changed: the applies change nothing and the status is not
	// written again.
	rv := s.ResourceVersion
	if err := h.reconcile(t); err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	got, _ = h.takeWrites()
	if want := []string{"apply deployments", "apply services", "apply configmaps"}; !slices.Equal(got, want) {
		t.Errorf("writes of a second Reconcile %q, want %q (no status write)", got, want)
	}
	if s = h.getWebsite(t); s.ResourceVersion != rv {
		t.Errorf("the Website changed (resourceVersion %s, was %s)", s.ResourceVersion, rv)
	}
	if events := h.takeEvents(); len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}

	// The Deployment controller reports the rollout done.
	dep, err := h.r.Deployments.Get(siteKey.Namespace, siteKey.Name)
	if err != nil {
		t.Fatal(err)
	}
	dep = dep.DeepCopy()
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	if err := h.r.Client.Status().Update(t.Context(), dep); err != nil {
		t.Fatal(err)
	}
	h.takeWrites()
	if err := h.reconcile(t); err != nil {
		t.Fatalf("Reconcile after the rollout: %v", err)
	}
	got, _ = h.takeWrites()
	if want := []string{"apply deployments", "apply services", "apply configmaps", "apply websites/status"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	s = h.getWebsite(t)
	checkStatus(t, s, metav1.ConditionTrue, "Available", 2)
	if p := objects.FindCondition(s.Status.Conditions, v1alpha1.ConditionProgressing); p == nil || p.Reason != "RolloutComplete" {
		t.Errorf("Progressing condition %+v, want reason RolloutComplete", p)
	}
	if events := h.takeEvents(); !slices.Equal(reasons(events), []string{"Normal Available"}) {
		t.Errorf("events %q, want one Available", events)
	}

	// A new image: the Deployment is updated, and Ready waits for its new
	// generation.
	s.Spec.Image = "nginx:1.28"
	if err := h.r.Client.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if s.Generation != 2 {
		t.Fatalf("generation %d after a spec change, want 2", s.Generation)
	}
	h.takeWrites()
	if err := h.reconcile(t); err != nil {
		t.Fatalf("Reconcile after a spec change: %v", err)
	}
	if err := h.cluster.Get(siteKey, dep); err != nil {
		t.Fatal(err)
	}
	if c := dep.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "nginx:1.28" {
		t.Errorf("Deployment containers %+v, want nginx:1.28", c)
	}
	checkStatus(t, h.getWebsite(t), metav1.ConditionFalse, "RollingOut", 2)
	if events := h.takeEvents(); !slices.Equal(reasons(events), []string{"Normal Updated", "Normal RollingOut"}) || !strings.HasSuffix(events[0], " Deployment default/shop") {
		t.Errorf("events %q, want Updated for the Deployment, then RollingOut", events)
	}
}

// TestReconcileNotOwned: a Deployment of the same name that another
// controller controls is left alone and reported, and Reconcile does not
// retry.
func TestReconcileNotOwned(t *testing.T) {
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: siteKey.Namespace, Name: siteKey.Name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: "0c5e0c5e-0000-4000-8000-000000000001", Controller: ptr.To(true),
		}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](5),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "other:1"}}},
			},
		},
	}
	h := newHarness(t, newWebsite(), theirs)
	before := &appsv1.Deployment{}
	if err := h.cluster.Get(siteKey, before); err != nil {
		t.Fatal(err)
	}

	err := h.reconcile(t)
	if !reconcile.IsTerminal(err) || !errors.Is(err, objects.ErrAlreadyControlled) {
		t.Errorf("Reconcile = %v, want a terminal ErrAlreadyControlled", err)
	}
	if got, _ := h.takeWrites(); !slices.Equal(got, []string{"patch websites"}) {
		t.Errorf("writes %q, want only the finalizer's patch", got)
	}
	after := &appsv1.Deployment{}
	if err := h.cluster.Get(siteKey, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || ptr.Deref(after.Spec.Replicas, 0) != 5 || len(after.OwnerReferences) != 1 || after.OwnerReferences[0].Kind != "ReplicaSet" {
		t.Errorf("the other controller's Deployment changed: %+v", after)
	}
	if err := h.cluster.Get(routeKey, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("route: %v, want none published", err)
	}
	events := h.takeEvents()
	if !slices.Equal(reasons(events), []string{"Warning NotOwned"}) || !strings.Contains(events[0], `ReplicaSet "other"`) {
		t.Errorf("events %q, want a NotOwned warning naming the ReplicaSet", events)
	}
}

// TestReconcileFinalize: a Website being deleted loses its route, then
// the operator's finalizer.
func TestReconcileFinalize(t *testing.T) {
	const other = "example.com/other"
	deleting := func(finalizers ...string) *v1alpha1.Website {
		s := newWebsite()
		s.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
		s.Finalizers = finalizers
		return s
	}
	route := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: routeKey.Name, Annotations: map[string]string{RouteAnnotation: "default/shop"}},
		Data:       map[string]string{"url": "http://shop.default.svc:8080"},
	}
	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		wantWrites []string
		wantEvents []string
		// wantFinalizers are the Website's finalizers afterwards; nil
		// means the Website is gone.
		wantFinalizers []string
	}{{
		name:       "route published",
		objs:       []runtime.Object{deleting(Finalizer), route},
		wantWrites: []string{"delete configmaps", "patch websites"},
		wantEvents: []string{"Normal Unpublished"},
	}, {
		name:       "route already gone",
		objs:       []runtime.Object{deleting(Finalizer)},
		wantWrites: []string{"delete configmaps -> NotFound", "patch websites"},
	}, {
		name:           "another finalizer remains",
		objs:           []runtime.Object{deleting(other, Finalizer), route},
		wantWrites:     []string{"delete configmaps", "patch websites"},
		wantEvents:     []string{"Normal Unpublished"},
		wantFinalizers: []string{other},
	}, {
		name:           "finalized already",
		objs:           []runtime.Object{deleting(other), route},
		wantFinalizers: []string{other},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			if err := h.reconcile(t); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got, ws := h.takeWrites()
			if !slices.Equal(got, tc.wantWrites) {
				t.Errorf("writes %q, want %q", got, tc.wantWrites)
			} else if len(ws) > 0 && (ws[0].Namespace != RoutesNamespace || ws[0].Name != routeKey.Name) {
				t.Errorf("deleted %s/%s, want the route %s", ws[0].Namespace, ws[0].Name, routeKey)
			}
			routeErr := h.cluster.Get(routeKey, &corev1.ConfigMap{})
			if len(tc.wantWrites) > 0 && !apierrors.IsNotFound(routeErr) {
				t.Errorf("route: %v, want it deleted", routeErr)
			} else if len(tc.wantWrites) == 0 && routeErr != nil {
				t.Errorf("route: %v, want it left alone", routeErr)
			}
			s := &v1alpha1.Website{}
			err := h.cluster.Get(siteKey, s)
			switch {
			case tc.wantFinalizers == nil && !apierrors.IsNotFound(err):
				t.Errorf("Website: %v, finalizers %v; want it gone", err, s.Finalizers)
			case tc.wantFinalizers != nil && err != nil:
				t.Errorf("Website: %v, want it kept with finalizers %v", err, tc.wantFinalizers)
			case tc.wantFinalizers != nil && !slices.Equal(s.Finalizers, tc.wantFinalizers):
				t.Errorf("finalizers %v, want %v", s.Finalizers, tc.wantFinalizers)
			}
			if events := h.takeEvents(); !slices.Equal(reasons(events), tc.wantEvents) {
				t.Errorf("events %q, want %q", events, tc.wantEvents)
			}
		})
	}
}

// TestReconcileNotFound: a Website that is gone needs nothing.
func TestReconcileNotFound(t *testing.T) {
	h := newHarness(t)
	if err := h.reconcile(t); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got, _ := h.takeWrites(); len(got) != 0 {
		t.Errorf("writes %q, want none", got)
	}
	if events := h.takeEvents(); len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}
}
