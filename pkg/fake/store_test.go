package fake_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}},
		},
	}
}

func rv(t *testing.T, obj metav1.Object) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a decimal number: %v", obj.GetResourceVersion(), err)
	}
	return n
}

// TestResourceVersionIsGlobal checks that one counter, like etcd's
// revision, orders the writes to every resource.
func TestResourceVersionIsGlobal(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "seed", nil))
			cs := clientset(t, c, ct.contentType)
			ctx := t.Context()
			cm, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("ns", "a", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sec, err := cs.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"k": "v"}
			cm2, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := []uint64{rv(t, cm), rv(t, sec), rv(t, cm2)}; !(1 < got[0] && got[0] < got[1] && got[1] < got[2]) {
				t.Errorf("resourceVersions of create configmap, create secret, update configmap = %v, want increasing after the seed's", got)
			}
			list, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if list.ResourceVersion != cm2.ResourceVersion {
				t.Errorf("secrets list resourceVersion = %q, want the last write's %q", list.ResourceVersion, cm2.ResourceVersion)
			}
		})
	}
}

// TestCreateSetsSystemFields checks uid, creationTimestamp, generation and
// generateName.
func TestCreateSetsSystemFields(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t)
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			sent := configMap("ns", "", nil)
			sent.GenerateName = "gen-"
			sent.UID = "chosen-by-client"
			a, err := cms.Create(t.Context(), sent, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := cms.Create(t.Context(), sent, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cm := range []*corev1.ConfigMap{a, b} {
				if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) != len("gen-")+5 {
					t.Errorf("generated name %q, want gen- and 5 characters", cm.Name)
				}
				if cm.UID == "" || cm.UID == sent.UID {
					t.Errorf("uid = %q, want a new random one", cm.UID)
				}
				if cm.CreationTimestamp.IsZero() {
					t.Error("creationTimestamp not set")
				}
				if cm.Generation != 1 {
					t.Errorf("generation = %d, want 1", cm.Generation)
				}
			}
			if a.Name == b.Name || a.UID == b.UID {
				t.Errorf("two creates got name %q and %q, uid %q and %q: want different", a.Name, b.Name, a.UID, b.UID)
			}
			var stored corev1.ConfigMap
			if err := c.Get(types.NamespacedName{Namespace: "ns", Name: a.Name}, &stored); err != nil {
				t.Fatal(err)
			}
			if stored.UID != a.UID || !stored.CreationTimestamp.Equal(&a.CreationTimestamp) {
				t.Errorf("stored uid %q created %v, response %q %v", stored.UID, stored.CreationTimestamp, a.UID, a.CreationTimestamp)
			}
		})
	}
}

// TestCreateRefusals checks kube-apiserver's answers to creates it refuses.
func TestCreateRefusals(t *testing.T) {
	c := newCluster(t, configMap("ns", "taken", nil))
	cms := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns")
	ctx := t.Context()

	_, err := cms.Create(ctx, configMap("ns", "taken", nil), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of an existing name: %v, want AlreadyExists", err)
	}
	_, err = cms.Create(ctx, configMap("ns", "", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("create without name or generateName: %v, want Invalid", err)
	}
	withRV := configMap("ns", "rv", nil)
	withRV.ResourceVersion = "1"
	_, err = cms.Create(ctx, withRV, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "resourceVersion should not be set") {
		t.Errorf("create with a resourceVersion: %v, want kube-apiserver's internal error", err)
	}
	_, err = cms.Create(ctx, configMap("other", "x", nil), metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("create with another namespace than the URL's: %v, want BadRequest", err)
	}
	if n := len(c.Writes()); n != 4 {
		t.Errorf("%d writes recorded, want the 4 refused", n)
	}
}

// TestCreateIgnoresStatus checks that a create through the API drops
// .status of a kind with a status subresource, while seeded objects keep it.
func TestCreateIgnoresStatus(t *testing.T) {
	seeded := deployment("ns", "seeded", 1)
	seeded.Status.ReadyReplicas = 1
	c := newCluster(t, seeded)
	d := deployment("ns", "created", 1)
	d.Status.ReadyReplicas = 1
	got, err := clientset(t, c, "application/json").AppsV1().Deployments("ns").Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyReplicas != 0 {
		t.Errorf("created deployment has status %+v, want it dropped", got.Status)
	}
	var s appsv1.Deployment
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "seeded"}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Status.ReadyReplicas != 1 {
		t.Errorf("seeded deployment status %+v, want it kept", s.Status)
	}
}

// TestGeneration checks that generation starts at 1 and moves only when
// something besides metadata and status changes, for a built-in and a
// custom kind.
func TestGeneration(t *testing.T) {
	ctx := t.Context()
	t.Run("deployment", func(t *testing.T) {
		c := newCluster(t)
		ds := clientset(t, c, "application/vnd.kubernetes.protobuf").AppsV1().Deployments("ns")
		d, err := ds.Create(ctx, deployment("ns", "d", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{1}
		d.Labels = map[string]string{"a": "b"}
		d, err = ds.Update(ctx, d, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d.Generation)
		d.Spec.Replicas = ptr.To[int32](3)
		d, err = ds.Update(ctx, d, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d.Generation)
		d.Status.Replicas = 3
		d, err = ds.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d.Generation)
		if got := want; got[0] != 1 || got[1] != 1 || got[2] != 2 || got[3] != 2 {
			t.Errorf("generation after create, label change, spec change, status change = %v, want [1 1 2 2]", got)
		}
	})
	t.Run("widget", func(t *testing.T) {
		c := newCluster(t)
		ws := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
		w, err := ws.Create(ctx, widget("ns", "w", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gens := []int64{w.GetGeneration()}
		w.SetAnnotations(map[string]string{"a": "b"})
		if w, err = ws.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		gens = append(gens, w.GetGeneration())
		_ = unstructured.SetNestedField(w.Object, "red", "spec", "color")
		if w, err = ws.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		gens = append(gens, w.GetGeneration())
		_ = unstructured.SetNestedField(w.Object, true, "status", "ready")
		if w, err = ws.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		gens = append(gens, w.GetGeneration())
		if gens[0] != 1 || gens[1] != 1 || gens[2] != 2 || gens[3] != 2 {
			t.Errorf("generation after create, annotation change, spec change, status change = %v, want [1 1 2 2]", gens)
		}
	})
}

// TestNoopUpdate checks that an update that changes nothing is not a
// write: no new resourceVersion, as etcd skips it.
func TestNoopUpdate(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", map[string]string{"k": "v"}))
	cms := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns")
	cm, err := cms.Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("no-op update moved resourceVersion %s to %s", cm.ResourceVersion, again.ResourceVersion)
	}
}

// TestNoSharedPointers checks that no caller can change the stored state
// through an object it passed in or got back.
func TestNoSharedPointers(t *testing.T) {
	seed := configMap("ns", "a", map[string]string{"k": "v"})
	c := newCluster(t, seed)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	check := func(after, want string) {
		t.Helper()
		var now corev1.ConfigMap
		if err := c.Get(key, &now); err != nil {
			t.Fatal(err)
		}
		if now.Data["k"] != want {
			t.Errorf("after %s, stored data %v, want k=%s", after, now.Data, want)
		}
	}

	seed.Data["k"] = "changed"
	check("changing the object given in Options.Objects", "v")

	var got corev1.ConfigMap
	if err := c.Get(key, &got); err != nil {
		t.Fatal(err)
	}
	got.Data["k"] = "changed"
	check("changing Get's object", "v")

	cm := configMap("ns", "a", map[string]string{"k": "w"})
	if _, err := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Writes()[0].Object.(*corev1.ConfigMap).Data["k"] = "changed"
	check("changing Writes' object", "w")
	if w := c.Writes()[0].Object.(*corev1.ConfigMap); w.Data["k"] != "w" {
		t.Errorf("Writes()[0].Object data %v after a caller changed its copy, want k=w", w.Data)
	}

	l, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := l.Get("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	cached.Data["k"] = "changed"
	check("changing a lister's object (which callers must not do)", "w")
}

// TestStoredAsReadBack checks that the store holds objects exactly as a
// client decodes them from the wire, so Get, a lister and a client agree
// field for field (reflect.DeepEqual, not semantic equality).
func TestStoredAsReadBack(t *testing.T) {
	seed := configMap("ns", "a", map[string]string{}) // an empty map is absent on the wire
	seed.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC))
	seed.Finalizers = []string{}
	c := newCluster(t, seed)
	fromClient, err := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns").Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stored corev1.ConfigMap
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "a"}, &stored); err != nil {
		t.Fatal(err)
	}
	l, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := l.Get("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromClient, &stored) || !reflect.DeepEqual(fromClient, cached) {
		t.Errorf("client read %#v\nGet %#v\nlister %#v\nwant all equal", fromClient, &stored, cached)
	}
	if stored.CreationTimestamp.Nanosecond() != 0 || stored.Data != nil || stored.Finalizers != nil {
		t.Errorf("stored %#v: want whole seconds and no empty map or list", stored)
	}
}
