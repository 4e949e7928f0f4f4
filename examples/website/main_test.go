package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/examples/internal/rbactest"
	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// envtest runs kube-apiserver and etcd only: no garbage collector and no
// Deployment controller. The tests check what the operator wrote, and play
// the Deployment controller themselves by writing a Deployment's status.

var (
	env  *envtest.Environment
	cfg  *rest.Config
	kube kubernetes.Interface
	// admin is ctrlkit's client with the admin's rights, for the tests'
	// own writes to Websites.
	admin *client.Client
)

func TestMain(m *testing.M) {
	if code, ok := runIfReplica(); ok { // a replica of TestShardedWebsites
		os.Exit(code)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "website: KUBEBUILDER_ASSETS is not set: run `make test`")
		os.Exit(1)
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "website: starting envtest:", err)
		os.Exit(1)
	}
	kube = kubernetes.NewForConfigOrDie(cfg)
	code := 1
	if err := newAdmin(); err != nil {
		fmt.Fprintln(os.Stderr, "website:", err)
	} else if err := createNamespace(RoutesNamespace); err != nil {
		fmt.Fprintln(os.Stderr, "website:", err)
	} else {
		code = m.Run()
		reportConflicts()
	}
	_ = env.Stop()
	os.Exit(code)
}

// newAdmin builds admin.
func newAdmin() error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	admin, err = client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, FieldManager: "website-e2e"})
	return err
}

func createNamespace(name string) error {
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// newNamespace creates a namespace named prefix-<random>, so that tests
// can run again (-count) against the same API server.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// startOperator runs the operator until the test ends, as a user that has
// only the permissions of rbac.yaml.
func startOperator(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	log := funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{})
	user := rbactest.User(t, env, kube, "rbac.yaml")
	mgr, err := manager.New(user, manager.Options{
		Name: Name, Logger: log, Scheme: scheme, Informers: InformerOptions(),
		ReadYourWrites: client.ReadYourWrites{Disabled: os.Getenv("WEBSITE_RYOW") == "off"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		countConflicts(t, mgr.Registry().(prometheus.Gatherer))
	})
}

// The operator's conflicts (HTTP 409 answers) and reconciles over every
// test, for reportConflicts.
var conflicts, reconciles float64

// countConflicts adds the 409 answers and the reconciles in a stopped
// operator's metrics to the totals.
func countConflicts(t *testing.T, g prometheus.Gatherer) {
	families, err := g.Gather()
	if err != nil {
		t.Errorf("gathering metrics: %v", err)
		return
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "rest_client_requests_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "code" && l.GetValue() == "409" {
						conflicts += m.GetCounter().GetValue()
					}
				}
			case "controller_runtime_reconcile_total":
				reconciles += m.GetCounter().GetValue()
			}
		}
	}
}

// reportConflicts prints the conflicts per 100 reconciles of the run, with
// read-your-own-writes on, or off when WEBSITE_RYOW=off.
func reportConflicts() {
	mode := "on"
	if os.Getenv("WEBSITE_RYOW") == "off" {
		mode = "off"
	}
	if reconciles > 0 {
		fmt.Printf("website: read-your-own-writes %s: %.0f conflicts in %.0f reconciles, %.1f per 100\n", mode, conflicts, reconciles, 100*conflicts/reconciles)
	}
}

// eventually polls cond until it returns nil or timeout passes, and then
// fails with cond's last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	const timeout = 20 * time.Second
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a stand-in for a condition
	}
}

func getSite(ns, name string) (*v1alpha1.Website, error) {
	site := &v1alpha1.Website{}
	return site, admin.GetFromServer(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, site)
}

// setup starts the operator and creates a Website in a new namespace.
func setup(t *testing.T, prefix string, spec v1alpha1.WebsiteSpec) *v1alpha1.Website {
	t.Helper()
	ns := newNamespace(t, prefix)
	startOperator(t)
	site := &v1alpha1.Website{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec:       spec,
	}
	if err := admin.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	return site
}

// deploymentIs reports whether the site's Deployment is controlled by it
// and runs want replicas of image on port.
func deploymentIs(site *v1alpha1.Website, replicas int32, image string, port int32) func() error {
	return func() error {
		d, err := kube.AppsV1().Deployments(site.Namespace).Get(context.Background(), site.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := controlledBy(d, site); err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers
		switch {
		case ptr.Deref(d.Spec.Replicas, -1) != replicas:
			return fmt.Errorf("replicas %d, want %d", ptr.Deref(d.Spec.Replicas, -1), replicas)
		case len(c) != 1 || c[0].Image != image || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != port:
			return fmt.Errorf("containers %+v, want one running %s on port %d", c, image, port)
		case d.Spec.Selector == nil || d.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != site.Name ||
			d.Spec.Template.Labels["app.kubernetes.io/instance"] != site.Name:
			return fmt.Errorf("selector %v, template labels %v: want instance=%s", d.Spec.Selector, d.Spec.Template.Labels, site.Name)
		}
		return nil
	}
}

// serviceIs reports whether the site's Service is controlled by it and
// exposes port.
func serviceIs(site *v1alpha1.Website, port int32) func() error {
	return func() error {
		s, err := kube.CoreV1().Services(site.Namespace).Get(context.Background(), site.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := controlledBy(s, site); err != nil {
			return err
		}
		p := s.Spec.Ports
		if len(p) != 1 || p[0].Port != port || p[0].TargetPort != intstr.FromString("http") || s.Spec.Selector["app.kubernetes.io/instance"] != site.Name {
			return fmt.Errorf("ports %+v selector %v, want port %d to target http on instance=%s", p, s.Spec.Selector, port, site.Name)
		}
		return nil
	}
}

func controlledBy(obj metav1.Object, site *v1alpha1.Website) error {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != site.UID || ref.Kind != "Website" || ref.APIVersion != v1alpha1.GroupVersion.String() || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		return fmt.Errorf("controller reference %+v, want Website %s (UID %s) blocking owner deletion", ref, site.Name, site.UID)
	}
	return nil
}

// routeIs reports whether the site's route holds its URL on port.
func routeIs(site *v1alpha1.Website, port int32) func() error {
	url := fmt.Sprintf("http://%s.%s.svc:%d", site.Name, site.Namespace, port)
	return func() error {
		cm, err := kube.CoreV1().ConfigMaps(RoutesNamespace).Get(context.Background(), routeName(site), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["url"] != url || cm.Annotations[RouteAnnotation] != site.Namespace+"/"+site.Name {
			return fmt.Errorf("route data %v annotations %v, want url %s", cm.Data, cm.Annotations, url)
		}
		return nil
	}
}

// statusIs reports whether the site's status describes its current
// generation with Ready = ready (and Progressing its opposite).
func statusIs(site *v1alpha1.Website, ready metav1.ConditionStatus) func() error {
	return func() error {
		s, err := getSite(site.Namespace, site.Name)
		if err != nil {
			return err
		}
		progressing := metav1.ConditionTrue
		if ready == metav1.ConditionTrue {
			progressing = metav1.ConditionFalse
		}
		r := objects.FindCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		p := objects.FindCondition(s.Status.Conditions, v1alpha1.ConditionProgressing)
		switch {
		case s.Status.ObservedGeneration != s.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", s.Status.ObservedGeneration, s.Generation)
		case r == nil || r.Status != ready || r.ObservedGeneration != s.Generation:
			return fmt.Errorf("Ready condition %+v, want %s for generation %d", r, ready, s.Generation)
		case p == nil || p.Status != progressing || p.ObservedGeneration != s.Generation:
			return fmt.Errorf("Progressing condition %+v, want %s for generation %d", p, progressing, s.Generation)
		case s.Status.URL != urlOf(s):
			return fmt.Errorf("url %q, want %q", s.Status.URL, urlOf(s))
		}
		return nil
	}
}

// rollOut plays the Deployment controller: it reports the site's
// Deployment as fully rolled out.
func rollOut(t *testing.T, site *v1alpha1.Website) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := kube.AppsV1().Deployments(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		_, err = kube.AppsV1().Deployments(site.Namespace).UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// updateSite changes the site's spec with change, retrying on conflicts
// with the operator's own writes.
func updateSite(t *testing.T, site *v1alpha1.Website, change func(*v1alpha1.WebsiteSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := getSite(site.Namespace, site.Name)
		if err != nil {
			return err
		}
		change(&s.Spec)
		return admin.Update(t.Context(), s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasEvent reports whether an event with reason was recorded on the site.
func hasEvent(site *v1alpha1.Website, reason string) func() error {
	return func() error {
		evs, err := kube.CoreV1().Events(site.Namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Website,involvedObject.name=" + site.Name + ",reason=" + reason,
		})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no %s event", reason)
		}
		return nil
	}
}

func TestCreateUpdateAndStatus(t *testing.T) {
	site := setup(t, "create", v1alpha1.WebsiteSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2)})
	if site.Spec.Port != 80 {
		t.Fatalf("port %d: want the CRD's default, 80", site.Spec.Port)
	}

	// Create: the children, the route, the finalizer, and a status that
	// waits for the rollout.
	eventually(t, "Deployment created", deploymentIs(site, 2, "nginx:1.27", 80))
	eventually(t, "Service created", serviceIs(site, 80))
	eventually(t, "route published", routeIs(site, 80))
	eventually(t, "status Ready=False, Progressing=True", statusIs(site, metav1.ConditionFalse))
	if s, err := getSite(site.Namespace, site.Name); err != nil || !objects.HasFinalizer(s, Finalizer) {
		t.Fatalf("finalizer %s missing: %+v, %v", Finalizer, s, err)
	}
	eventually(t, "Created event", hasEvent(site, "Created"))

	rollOut(t, site)
	eventually(t, "status Ready=True, Progressing=False", statusIs(site, metav1.ConditionTrue))
	eventually(t, "availableReplicas 2", func() error {
		s, err := getSite(site.Namespace, site.Name)
		if err == nil && s.Status.AvailableReplicas != 2 {
			err = fmt.Errorf("availableReplicas %d", s.Status.AvailableReplicas)
		}
		return err
	})

	// Update: the children follow the spec, and the status the generation.
	updateSite(t, site, func(s *v1alpha1.WebsiteSpec) {
		s.Replicas, s.Image, s.Port = ptr.To[int32](3), "nginx:1.28", 8080
	})
	eventually(t, "Deployment updated", deploymentIs(site, 3, "nginx:1.28", 8080))
	eventually(t, "Service updated", serviceIs(site, 8080))
	eventually(t, "route updated", routeIs(site, 8080))
	eventually(t, "status of generation 2 Ready=False", statusIs(site, metav1.ConditionFalse))
	rollOut(t, site)
	eventually(t, "status of generation 2 Ready=True", statusIs(site, metav1.ConditionTrue))
	if s, err := getSite(site.Namespace, site.Name); err != nil || s.Generation != 2 {
		t.Fatalf("generation %d, want 2 (%v)", s.Generation, err)
	}
}

func TestDriftRepair(t *testing.T) {
	site := setup(t, "drift", v1alpha1.WebsiteSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2)})
	eventually(t, "Deployment created", deploymentIs(site, 2, "nginx:1.27", 80))
	eventually(t, "Service created", serviceIs(site, 80))
	eventually(t, "route published", routeIs(site, 80))

	// Someone scales the Deployment by hand.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := kube.AppsV1().Deployments(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](7)
		_, err = kube.AppsV1().Deployments(site.Namespace).Update(t.Context(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "Deployment replicas restored", deploymentIs(site, 2, "nginx:1.27", 80))

	// Someone deletes the Service.
	old, err := kube.CoreV1().Services(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Services(site.Namespace).Delete(t.Context(), site.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Service recreated", func() error {
		s, err := kube.CoreV1().Services(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
		if err == nil && s.UID == old.UID {
			return fmt.Errorf("still the old Service")
		}
		if err != nil {
			return err
		}
		return serviceIs(site, 80)()
	})

	// Someone deletes the route, which no owner reference ties to the site.
	if err := kube.CoreV1().ConfigMaps(RoutesNamespace).Delete(t.Context(), routeName(site), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "route recreated", routeIs(site, 80))
}

func TestDeleteRemovesRoute(t *testing.T) {
	site := setup(t, "delete", v1alpha1.WebsiteSpec{Image: "nginx:1.27"})
	eventually(t, "route published", routeIs(site, 80))
	eventually(t, "finalizer added", func() error {
		s, err := getSite(site.Namespace, site.Name)
		if err == nil && !objects.HasFinalizer(s, Finalizer) {
			err = fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return err
	})

	if err := admin.Delete(t.Context(), site, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "route deleted", func() error {
		_, err := kube.CoreV1().ConfigMaps(RoutesNamespace).Get(t.Context(), routeName(site), metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("route still there")
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	eventually(t, "Website gone (finalizer removed)", func() error {
		s, err := getSite(site.Namespace, site.Name)
		if err == nil {
			return fmt.Errorf("still there with finalizers %v", s.Finalizers)
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	eventually(t, "Unpublished event", hasEvent(site, "Unpublished"))
}

// TestNotOwned: a Deployment of the same name controlled by something else
// is left alone and reported, not taken over.
func TestNotOwned(t *testing.T) {
	ns := newNamespace(t, "taken")
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop", OwnerReferences: []metav1.OwnerReference{{
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
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t)
	site := &v1alpha1.Website{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec:       v1alpha1.WebsiteSpec{Image: "nginx:1.27"},
	}
	if err := admin.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NotOwned warning", hasEvent(site, "NotOwned"))
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 5 || len(d.OwnerReferences) != 1 {
		t.Errorf("the other controller's Deployment was changed: replicas %d, owners %+v", *d.Spec.Replicas, d.OwnerReferences)
	}
}

// TestSample: the sample in config/samples is a valid Website.
func TestSample(t *testing.T) {
	f, err := os.Open(filepath.Join("config", "samples", "website.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	site := &v1alpha1.Website{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(site); err != nil {
		t.Fatal(err)
	}
	site.Namespace = "default"
	got := site.DeepCopy()
	if err := admin.With(client.WriteOptions{DryRun: true}).Create(t.Context(), got); err != nil {
		t.Fatalf("the API server rejects the sample: %v", err)
	}
	if got.Spec.Image == "" || ptr.Deref(got.Spec.Replicas, 0) == 0 || got.Spec.Port == 0 {
		t.Errorf("sample spec %+v: want image, replicas and port set", got.Spec)
	}
}
