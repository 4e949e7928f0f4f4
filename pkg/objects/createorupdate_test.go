package objects_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
	conflict := apierrors.NewConflict(corev1.Resource("configmaps"), "web", errors.New("the object has been modified"))

	tests := []struct {
		name     string
		seed     []runtime.Object
		reactor  k8stesting.ReactionFunc // on update, when set
		mutate   func(*corev1.ConfigMap) error
		want     objects.OperationResult
		wantErr  func(error) bool
		wantReqs []string
		wantData map[string]string // stored, when no error
	}{
		{
			name:     "absent object is created with namespace and name set",
			mutate:   setColor("green"),
			want:     objects.Created,
			wantReqs: []string{"create configmaps"},
			wantData: map[string]string{"color": "green"},
		},
		{
			name:     "changed object is updated",
			seed:     []runtime.Object{existing.DeepCopy()},
			mutate:   setColor("green"),
			want:     objects.Updated,
			wantReqs: []string{"update configmaps"},
			wantData: map[string]string{"color": "green"},
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
			name:   "conflict from a stale cache is returned as is",
			seed:   []runtime.Object{existing.DeepCopy()},
			mutate: setColor("green"),
			reactor: func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, conflict
			},
			wantErr:  func(err error) bool { return apierrors.IsConflict(err) && err == error(conflict) },
			wantReqs: []string{"update configmaps"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(tt.seed...)
			if tt.reactor != nil {
				kube.PrependReactor("update", "configmaps", tt.reactor)
			}
			lister := newLister[*corev1.ConfigMap](t, kube, nil)
			kube.ClearActions()
			// The object the cache holds now, and a snapshot of it: the
			// cache may replace it after a write, but never change it.
			cached, _ := lister.Get("team-a", "web")
			snapshot := cached.DeepCopy()

			got, op, err := objects.CreateOrUpdate(t.Context(), lister, kube.CoreV1().ConfigMaps("team-a"), "team-a", "web", tt.mutate)

			if reqs := requests(kube.Actions()); !slices.Equal(reqs, tt.wantReqs) {
				t.Errorf("requests = %q, want %q (never a get: reads come from the cache)", reqs, tt.wantReqs)
			}
			if !equality.Semantic.DeepEqual(cached, snapshot) {
				t.Errorf("the cached object was mutated: %+v, was %+v", cached, snapshot)
			}
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("error = %v, not the one expected", err)
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
			stored, err := kube.CoreV1().ConfigMaps("team-a").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(stored.Data, tt.wantData) {
				t.Errorf("stored data %v, want %v", stored.Data, tt.wantData)
			}
			if len(tt.seed) > 0 && stored.Labels["keep"] != "me" {
				t.Errorf("fields mutate did not touch were lost: labels %v", stored.Labels)
			}
		})
	}
}

// TestCreateOrUpdateSteadyState follows an object from absent to in shape:
// once the cache has caught up, the same mutate writes nothing.
func TestCreateOrUpdateSteadyState(t *testing.T) {
	kube := fake.NewClientset()
	lister := newLister[*corev1.ConfigMap](t, kube, nil)
	w := kube.CoreV1().ConfigMaps("team-a")
	mutate := func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"color": "blue"}
		return nil
	}
	for i, want := range []objects.OperationResult{objects.Created, objects.Unchanged, objects.Unchanged} {
		_, op, err := objects.CreateOrUpdate(t.Context(), lister, w, "team-a", "web", mutate)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if op != want {
			t.Fatalf("call %d: result %q, want %q", i, op, want)
		}
		eventually(t, 10*time.Second, "the cache to hold the ConfigMap", func() bool {
			_, err := lister.Get("team-a", "web")
			return err == nil
		})
	}
}
