package objects_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// TestMain fails the package if a test leaves an informer goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Site is a custom resource type (group test.ctrlkit.io/v1) with a
// hand-written DeepCopyObject, standing in for a CRD's generated Go type.
type Site struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SiteSpec   `json:"spec"`
	Status            SiteStatus `json:"status,omitempty"`
}

// SiteSpec is the spec of a Site.
type SiteSpec struct {
	Image string `json:"image"`
}

// SiteStatus is the status of a Site.
type SiteStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (s *Site) DeepCopyObject() runtime.Object {
	out := *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if s.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(s.Status.Conditions))
		for i := range s.Status.Conditions {
			s.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	return &out
}

// SiteList is a list of Sites.
type SiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Site `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *SiteList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Site, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Site)
		}
	}
	return &out
}

var (
	siteGV  = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}
	siteGVK = siteGV.WithKind("Site")
	siteGVR = siteGV.WithResource("sites")
)

// testScheme knows client-go's types and Site.
func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(siteGV, &Site{}, &SiteList{})
	metav1.AddToGroupVersion(s, siteGV)
	return s
}

// newDynamic returns a fake dynamic client holding objs (unstructured),
// able to list Sites.
func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{siteGVR: "SiteList"}, objs...)
}

// newLister starts a Cache over the fake clients with one informer, for T,
// waits for it to sync, and stops it when the test ends.
func newLister[T objects.Object](t testing.TB, kube *fake.Clientset, dyn *dynamicfake.FakeDynamicClient) informer.Lister[T] {
	t.Helper()
	lister, stop, err := startLister[T](context.Background(), kube, dyn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return lister
}

// startLister is newLister for examples, which have no testing.TB.
func startLister[T objects.Object](ctx context.Context, kube *fake.Clientset, dyn *dynamicfake.FakeDynamicClient) (informer.Lister[T], func(), error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	mapper.Add(siteGVK, meta.RESTScopeNamespace)
	if dyn == nil {
		dyn = newDynamic()
	}
	c, err := informer.New(informer.Clients{Kube: kube, Dynamic: dyn, Mapper: mapper}, informer.Options{Scheme: testScheme()})
	if err != nil {
		return informer.Lister[T]{}, nil, err
	}
	inf, err := informer.For[T](c)
	if err != nil {
		return informer.Lister[T]{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := func() { cancel(); c.Wait() }
	if err := c.Start(ctx); err != nil {
		stop()
		return informer.Lister[T]{}, nil, err
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
	defer cancelSync()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		stop()
		return informer.Lister[T]{}, nil, err
	}
	return inf.Lister(), stop, nil
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not a stand-in for a condition
	}
}

// requests returns the verbs of the requests other than list and watch (the
// informer's) that reached a fake client.
func requests(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if v := a.GetVerb(); v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}
