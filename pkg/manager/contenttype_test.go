package manager_test

import (
	"cmp"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// Gizmo is a custom resource type (group test.ctrlkit.io/v1).
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// GizmoList is a list of Gizmos.
type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *GizmoList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Gizmo, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Gizmo)
	}
	return &out
}

// request is what the API server was asked: method, path and the
// Accept and Content-Type headers.
type request struct{ method, path, accept, contentType string }

// TestContentTypes: the manager lists and watches built-in types, and
// sends events, as protobuf unless the rest config names a content type
// (client-go's generated clients prefer protobuf when it is empty); custom
// types always travel as JSON, decoded straight into their Go type.
func TestContentTypes(t *testing.T) {
	const protobuf = "application/vnd.kubernetes.protobuf"
	gv := schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}
	tests := []struct {
		name        string
		contentType string // of the rest config
		builtin     string // Accept of built-in lists and watches
	}{
		{name: "default", builtin: protobuf + ",application/json"},
		{name: "JSON", contentType: "application/json", builtin: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := kubescheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			scheme.AddKnownTypes(gv, &Gizmo{}, &GizmoList{})
			metav1.AddToGroupVersion(scheme, gv)
			g := &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g"}}
			g.Spec.Size = 3
			cluster, err := fake.New(fake.Options{Scheme: scheme, Objects: []runtime.Object{configMap("default", "cm"), g}})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []request
			cfg := cluster.Config()
			cfg.ContentType = tt.contentType
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripper(func(req *http.Request) (*http.Response, error) {
					mu.Lock()
					seen = append(seen, request{req.Method, req.URL.Path, req.Header.Get("Accept"), req.Header.Get("Content-Type")})
					mu.Unlock()
					return rt.RoundTrip(req)
				})
			})
			m, err := manager.New(cfg, manager.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			cms, err := informer.For[*corev1.ConfigMap](m.Cache())
			if err != nil {
				t.Fatal(err)
			}
			gizmos, err := informer.For[*Gizmo](m.Cache())
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, m)
			eventually(t, "the caches to sync", m.Ready)
			if _, err := cms.Lister().Get("default", "cm"); err != nil {
				t.Error(err)
			}
			if got, err := gizmos.Lister().Get("default", "g"); err != nil || got.Spec.Size != 3 {
				t.Errorf("Gizmo from the cache = %v, %v; want size 3", got, err)
			}
			// The call the event recorder's sink makes, a hand-written
			// method that client-go does not switch to protobuf itself. Its
			// ctx has a logger: client-go would read the global klog's.
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "cm.seen"},
				InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "cm"},
				Reason:         "Seen", Type: corev1.EventTypeNormal,
			}
			ctx := logr.NewContext(t.Context(), logr.Discard())
			if _, err := m.Kubernetes().CoreV1().Events("").CreateWithEventNamespaceWithContext(ctx, ev); err != nil {
				t.Fatal(err)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}

			mu.Lock()
			defer mu.Unlock()
			check := func(what string, match func(request) bool, want func(request) string, wantValue string) {
				t.Helper()
				n := 0
				for _, req := range seen {
					if match(req) {
						n++
						if got := want(req); got != wantValue {
							t.Errorf("%s %s: %s, want %q", req.method, req.path, what, wantValue)
						}
					}
				}
				if n == 0 {
					t.Errorf("no request matched for %s", what)
				}
			}
			accept := func(r request) string { return r.accept }
			check("Accept of configmaps", func(r request) bool { return r.method == http.MethodGet && r.path == "/api/v1/configmaps" },
				accept, tt.builtin)
			check("Accept of gizmos", func(r request) bool { return r.method == http.MethodGet && r.path == "/apis/test.ctrlkit.io/v1/gizmos" },
				accept, "application/json")
			wantEvent := cmp.Or(tt.contentType, protobuf)
			check("Content-Type of events", func(r request) bool { return r.method == http.MethodPost && strings.HasSuffix(r.path, "/events") },
				func(r request) string { return r.contentType }, wantEvent)
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
