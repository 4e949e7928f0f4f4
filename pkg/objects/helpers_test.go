package objects_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Site is a custom resource type (group test.ctrlkit.io/v1) with a status
// subresource and a hand-written DeepCopyObject, standing in for a CRD's
// generated Go type.
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

// SiteList is a list of Sites: the fake serves lists and watches of a kind
// only with its List kind registered.
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

// env is a fake API server holding some objects, a ctrlkit client on it,
// and a log of every request that client sent.
type env struct {
	cluster *fake.Cluster
	client  *client.Client
	sent    *recorder
}

// newEnv returns an env whose fake holds objs.
func newEnv(t testing.TB, objs ...runtime.Object) env {
	t.Helper()
	e, err := startEnv(objs...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// startEnv is newEnv for examples, which have no testing.TB.
func startEnv(objs ...runtime.Object) (env, error) {
	scheme := testScheme()
	cluster, err := fake.New(fake.Options{Scheme: scheme, Objects: objs})
	if err != nil {
		return env{}, err
	}
	cfg := cluster.Config()
	sent := &recorder{next: cfg.Transport}
	cfg.Transport = sent
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: cluster.RESTMapper()})
	if err != nil {
		return env{}, err
	}
	return env{cluster: cluster, client: c, sent: sent}, nil
}

// lister returns a lister of T over e's fake, never behind it.
func lister[T runtime.Object](t testing.TB, e env) informer.Lister[T] {
	t.Helper()
	l, err := fake.Lister[T](e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writes lists the writes the fake answered, other than to Leases, as
// "verb resource[/subresource]", with " refused" after those it refused.
func writes(c *fake.Cluster) []string {
	var out []string
	for _, w := range c.Writes() {
		if w.Resource.Resource == "leases" {
			continue
		}
		s := w.Verb + " " + w.Resource.Resource
		if w.Subresource != "" {
			s += "/" + w.Subresource
		}
		if w.Err != nil {
			s += " refused"
		}
		out = append(out, s)
	}
	return out
}

// recorder is an http.RoundTripper that logs the method and path of every
// request before passing it on.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, fmt.Sprintf("%s %s", req.Method, req.URL.Path))
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// requests returns the requests sent so far.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}
