package objects_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

func TestCreateOrUpdate(t *testing.T) {
	existing := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Labels: map[string]string{"keep": "me"}},
		Data:       map[string]string{"color": "blue"},
	}
	setColor := func(c string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["color"] = c
			return nil
		}
	}
	errBoom := errors.New("boom")
	// Another process's write of team-a/web, which the cache has not seen.
	otherUpdates := func(ctx context.Context, c *client.Client) error {
		var cm corev1.ConfigMap
		if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: "team-a", Name: "web"}, &cm); err != nil {
			return err
		}
		cm.Labels["by"] = "other"
		return c.Update(ctx, &cm)
	}
	otherCreates := func(ctx context.Context, c *client.Client) error {
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}})
	}

	tests := []struct {
		name string
		seed []runtime.Object
		// other, when set, is another writer's write made after the
		// lister was filled, which it does not see.
		other      func(context.Context, *client.Client) error
		mutate     func(*corev1.ConfigMap) error
		want       objects.OperationResult
		wantErr    func(error) bool
		wantWrites []string
		wantData   map[string]string // stored, when no error
	}{
		{
			name:       "absent object is created with namespace and name set",
			mutate:     setColor("green"),
			want:       objects.Created,
			wantWrites: []string{"create configmaps"},
			wantData:   map[string]string{"color": "green"},
		},
		{
			name:       "changed object is updated",
			seed:       []runtime.Object{existing.DeepCopy()},
			mutate:     setColor("green"),
			want:       objects.Updated,
			wantWrites: []string{"update configmaps"},
			wantData:   map[string]string{"color": "green"},
		},
		{
			name:     "unchanged object is not written",
			seed:     []runtime.Object{existing.DeepCopy()},
			mutate:   setColor("blue"),
			want:     objects.Unchanged,
			wantData: map[string]string{"color": "blue"},
		},
		{
			name:    "mutate error is returned as is and nothing is written",
			seed:    []runtime.Object{existing.DeepCopy()},
			mutate:  func(*corev1.ConfigMap) error { return errBoom },
			wantErr: func(err error) bool { return err == errBoom },
		},
		{
			name: "mutate that renames is refused",
			mutate: func(cm *corev1.ConfigMap) error {
				cm.Name = "other"
				return nil
			},
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "must not") },
		},
		{
			name: "mutate that moves the object to another namespace is refused",
			seed: []runtime.Object{existing.DeepCopy()},
			mutate: func(cm *corev1.ConfigMap) error {
				cm.Namespace = "team-b"
				cm.Data["color"] = "green"
				return nil
			},
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "must not") },
		},
		{
			name:       "conflict from a stale cache is returned as is",
			seed:       []runtime.Object{existing.DeepCopy()},
			other:      otherUpdates,
			mutate:     setColor("green"),
			wantErr:    apierrors.IsConflict,
			wantWrites: []string{"update configmaps refused"},
		},
		{
			name:       "AlreadyExists from a stale cache is returned as is",
			other:      otherCreates,
			mutate:     setColor("green"),
			wantErr:    apierrors.IsAlreadyExists,
			wantWrites: []string{"create configmaps refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.seed...)
			cms := lister[*corev1.ConfigMap](t, e)
			if tt.other != nil {
				cms = snapshot(t, cms)
				if err := tt.other(t.Context(), e.client); err != nil {
					t.Fatal(err)
				}
			}
			e.cluster.ResetWrites()
			sentBefore := len(e.sent.requests())
			// The object the cache holds now, and a snapshot of it: the
			// cache may replace it after a write, but never change it.
			cached, _ := cms.Get("team-a", "web")
			snap := cached.DeepCopy()

			got, op, err := objects.CreateOrUpdate(t.Context(), e.client, cms, "team-a", "web", tt.mutate)

			if w := writes(e.cluster); !slices.Equal(w, tt.wantWrites) {
				t.Errorf("writes = %q, want %q", w, tt.wantWrites)
			}
			for _, r := range e.sent.requests()[sentBefore:] {
				if strings.HasPrefix(r, http.MethodGet+" ") {
					t.Errorf("request %s sent: reads must come from the cache", r)
				}
			}
			if !equality.Semantic.DeepEqual(cached, snap) {
				t.Errorf("the cached object was mutated: %+v, was %+v", cached, snap)
			}
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("error = %v, not the one expected", err)
				}
				if ws := e.cluster.Writes(); len(ws) > 0 {
					// The API server's refusal, not wrapped.
					var status *apierrors.StatusError
					if !errors.As(err, &status) || error(status) != err || err.Error() != ws[0].Err.Error() {
						t.Errorf("error = %#v, want the API server's answer %q as is", err, ws[0].Err)
					}
				}
				if got != nil || op != objects.Unchanged {
					t.Errorf("on error got (%v, %q), want (nil, %q)", got, op, objects.Unchanged)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if op != tt.want {
				t.Errorf("result = %q, want %q", op, tt.want)
			}
			if got.Namespace != "team-a" || got.Name != "web" || !maps.Equal(got.Data, tt.wantData) {
				t.Errorf("returned %s/%s data %v, want team-a/web data %v", got.Namespace, got.Name, got.Data, tt.wantData)
			}
			var stored corev1.ConfigMap
			if err := e.cluster.Get(types.NamespacedName{Namespace: "team-a", Name: "web"}, &stored); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(stored.Data, tt.wantData) {
				t.Errorf("stored data %v, want %v", stored.Data, tt.wantData)
			}
			if op != objects.Unchanged && got.ResourceVersion != stored.ResourceVersion {
				t.Errorf("returned resourceVersion %q, want the stored object's %q", got.ResourceVersion, stored.ResourceVersion)
			}
			if len(tt.seed) > 0 && stored.Labels["keep"] != "me" {
				t.Errorf("fields mutate did not touch were lost: labels %v", stored.Labels)
			}
		})
	}
}

// TestCreateOrUpdateSteadyState follows an object from absent to in shape:
// once the cache holds it, the same mutate writes nothing.
func TestCreateOrUpdateSteadyState(t *testing.T) {
	e := newEnv(t)
	cms := lister[*corev1.ConfigMap](t, e)
	mutate := func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"color": "blue"}
		return nil
	}
	for i, want := range []objects.OperationResult{objects.Created, objects.Unchanged, objects.Unchanged} {
		_, op, err := objects.CreateOrUpdate(t.Context(), e.client, cms, "team-a", "web", mutate)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if op != want {
			t.Fatalf("call %d: result %q, want %q", i, op, want)
		}
	}
	if w := writes(e.cluster); !slices.Equal(w, []string{"create configmaps"}) {
		t.Errorf("writes = %q, want one create", w)
	}
}

// TestCreateOrUpdateCustomType creates, updates and leaves alone a Site, a
// type with no generated clientset, and never touches its status.
func TestCreateOrUpdateCustomType(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: metav1.Unix(1700000000, 0)}
	e := newEnv(t, &Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "blog"},
		Spec:       SiteSpec{Image: "nginx:1.26"},
		Status:     SiteStatus{Conditions: []metav1.Condition{ready}},
	})
	sites := lister[*Site](t, e)
	image := func(img string) func(*Site) error {
		return func(s *Site) error { s.Spec.Image = img; return nil }
	}
	steps := []struct {
		name, image string
		want        objects.OperationResult
	}{
		{"web", "nginx:1.27", objects.Created},
		{"blog", "nginx:1.27", objects.Updated},
		{"blog", "nginx:1.27", objects.Unchanged},
	}
	for _, s := range steps {
		got, op, err := objects.CreateOrUpdate(t.Context(), e.client, sites, "team-a", s.name, image(s.image))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if op != s.want || got.Name != s.name || got.Spec.Image != s.image {
			t.Errorf("%s: got %q, name %q, image %q; want %q, %q, %q", s.name, op, got.Name, got.Spec.Image, s.want, s.name, s.image)
		}
		var stored Site
		if err := e.cluster.Get(types.NamespacedName{Namespace: "team-a", Name: s.name}, &stored); err != nil {
			t.Fatal(err)
		}
		if stored.Spec.Image != s.image {
			t.Errorf("%s: stored image %q, want %q", s.name, stored.Spec.Image, s.image)
		}
	}
	var blog Site
	if err := e.cluster.Get(types.NamespacedName{Namespace: "team-a", Name: "blog"}, &blog); err != nil {
		t.Fatal(err)
	}
	if !objects.IsConditionTrue(blog.Status.Conditions, "Ready") {
		t.Errorf("the update lost the status: %+v", blog.Status)
	}
	if w := writes(e.cluster); !slices.Equal(w, []string{"create sites", "update sites"}) {
		t.Errorf("writes = %q, want a create and an update of sites", w)
	}
}

// snapshot returns a lister of ConfigMaps holding a copy of what l holds
// now: a cache that will not hear of later writes.
func snapshot(t *testing.T, l informer.Lister[*corev1.ConfigMap]) informer.Lister[*corev1.ConfigMap] {
	t.Helper()
	cms, err := l.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	ix := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, cm := range cms {
		if err := ix.Add(cm.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	return informer.NewLister[*corev1.ConfigMap](ix, corev1.Resource("configmaps"))
}
