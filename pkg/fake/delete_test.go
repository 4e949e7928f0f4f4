package fake_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestDelete checks a delete without finalizers: the object is gone and
// the answer is a Status Success, as kube-apiserver sends.
func TestDelete(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", nil), configMap("ns", "b", nil))
	code, body := rawDo(t, c, "DELETE", "/api/v1/namespaces/ns/configmaps/a?propagationPolicy=Background&gracePeriodSeconds=0", "", "")
	var s metav1.Status
	if err := json.Unmarshal(body, &s); err != nil || code != http.StatusOK || s.Kind != "Status" || s.Status != metav1.StatusSuccess || s.Details.Name != "a" {
		t.Errorf("DELETE = %d %s, want 200 and a Status Success naming a", code, body)
	}
	var cm corev1.ConfigMap
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "a"}, &cm); !apierrors.IsNotFound(err) {
		t.Errorf("after DELETE, Get: %v, want NotFound", err)
	}
	cms := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().ConfigMaps("ns")
	if err := cms.Delete(t.Context(), "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a missing object: %v, want NotFound", err)
	}
	policy := metav1.DeletePropagationForeground
	if err := cms.Delete(t.Context(), "b", metav1.DeleteOptions{PropagationPolicy: &policy, GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Errorf("delete with propagationPolicy and gracePeriodSeconds: %v", err)
	}
}

// TestDeletePreconditions checks that uid and resourceVersion
// preconditions, sent as JSON or protobuf, must hold.
func TestDeletePreconditions(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "a", nil))
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()
			cm, err := cms.Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []metav1.Preconditions{{UID: ptr.To(types.UID("other"))}, {ResourceVersion: ptr.To("99")}} {
				if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &p}); !apierrors.IsConflict(err) {
					t.Errorf("delete with precondition %+v: %v, want Conflict", p, err)
				}
			}
			p := metav1.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}
			if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &p}); err != nil {
				t.Errorf("delete with preconditions that hold: %v", err)
			}
		})
	}
}

// TestFinalizers checks deletion of an object with finalizers: marked,
// then removed when an update drops the last finalizer; no new finalizer
// and no create of the same name meanwhile.
func TestFinalizers(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			seed := configMap("ns", "a", nil)
			seed.Finalizers = []string{"example.com/a", "example.com/b"}
			c := newCluster(t, seed)
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()
			before, err := cms.Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			code, body := rawDo(t, c, "DELETE", "/api/v1/namespaces/ns/configmaps/a", "", "")
			var marked corev1.ConfigMap
			if err := json.Unmarshal(body, &marked); err != nil || code != http.StatusOK || marked.Kind != "ConfigMap" {
				t.Fatalf("DELETE of an object with finalizers = %d %s, want 200 and the object", code, body)
			}
			if marked.DeletionTimestamp == nil || marked.DeletionGracePeriodSeconds == nil || *marked.DeletionGracePeriodSeconds != 0 ||
				rv(t, &marked) <= rv(t, before) || marked.Generation != before.Generation+1 {
				t.Errorf("marked object: deletionTimestamp %v, grace %v, resourceVersion %s (was %s), generation %d (was %d); "+
					"want set, 0, newer, bumped", marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds,
					marked.ResourceVersion, before.ResourceVersion, marked.Generation, before.Generation)
			}
			if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
				t.Errorf("second delete: %v", err)
			}
			again, err := cms.Get(ctx, "a", metav1.GetOptions{})
			if err != nil || again.ResourceVersion != marked.ResourceVersion {
				t.Errorf("after a second delete, %v %v; want the object unchanged", again, err)
			}

			if _, err := cms.Create(ctx, configMap("ns", "a", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("create while the old object is being deleted: %v, want AlreadyExists", err)
			}
			more := again.DeepCopy()
			more.Finalizers = append(more.Finalizers, "example.com/c")
			if _, err := cms.Update(ctx, more, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
				t.Errorf("adding a finalizer to an object being deleted: %v, want Invalid", err)
			}
			cleared := again.DeepCopy()
			cleared.DeletionTimestamp = nil
			cleared.Finalizers = []string{"example.com/b"}
			cleared.Data = map[string]string{"k": "v"}
			got, err := cms.Update(ctx, cleared, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, []string{"example.com/b"}) || got.Data["k"] != "v" {
				t.Errorf("update of an object being deleted = %+v; want it kept marked, with the update applied", got)
			}

			got, err = cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Finalizers) != 0 {
				t.Errorf("the patch removing the last finalizer answered %+v", got)
			}
			if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("after the last finalizer is removed, Get: %v, want NotFound", err)
			}
		})
	}
}

// TestDeleteCollection checks deletecollection with a label selector.
func TestDeleteCollection(t *testing.T) {
	labeled := func(name, app string, finalizers ...string) *corev1.ConfigMap {
		cm := configMap("ns", name, nil)
		cm.Labels = map[string]string{"app": app}
		cm.Finalizers = finalizers
		return cm
	}
	c := newCluster(t, labeled("a", "web"), labeled("b", "web", "example.com/f"), labeled("c", "db"), configMap("other", "d", nil))
	cs := clientset(t, c, "application/vnd.kubernetes.protobuf")
	ctx := t.Context()
	if err := cs.CoreV1().ConfigMaps("ns").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=web"}); err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); !slices.Equal(got, []string{"ns/b", "ns/c", "other/d"}) {
		t.Errorf("after deletecollection app=web, %v remain; want ns/b (finalizer), ns/c, other/d", got)
	}
	if list.Items[0].DeletionTimestamp == nil {
		t.Error("ns/b has a finalizer and was not marked for deletion")
	}
}

// TestDeleteAnswer checks the answer to a delete that removes the object,
// as kube-apiserver's generic registry gives it: a Status Success whose
// details name the object, its group, its resource (in the field kind)
// and its uid, also for dryRun, in protobuf and for a client asking for
// metadata only; or, for the kinds whose
// registry returns the deleted object (Pods, Services, Namespaces and a
// few more), the object as it was deleted.
func TestDeleteAnswer(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	c := newCluster(t, configMap("ns", "a", nil), configMap("ns", "b", nil), deployment("ns", "d", 1),
		&Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}, pod)
	uid := func(obj runtime.Object) types.UID {
		t.Helper()
		key := types.NamespacedName{Namespace: "ns"}
		m, _ := meta.Accessor(obj)
		key.Name = m.GetName()
		if err := c.Get(key, obj); err != nil {
			t.Fatal(err)
		}
		return obj.(metav1.Object).GetUID()
	}
	for _, tc := range []struct {
		path, accept string
		want         metav1.StatusDetails
	}{
		{"/api/v1/namespaces/ns/configmaps/a?dryRun=All", "", metav1.StatusDetails{Name: "a", Kind: "configmaps", UID: uid(configMap("ns", "a", nil))}},
		{"/api/v1/namespaces/ns/configmaps/a", "", metav1.StatusDetails{Name: "a", Kind: "configmaps", UID: uid(configMap("ns", "a", nil))}},
		{"/api/v1/namespaces/ns/configmaps/b?dryRun=All", metadataAccept("PartialObjectMetadata"), metav1.StatusDetails{Name: "b", Kind: "configmaps", UID: uid(configMap("ns", "b", nil))}},
		{"/api/v1/namespaces/ns/configmaps/b", protobufAccept, metav1.StatusDetails{Name: "b", Kind: "configmaps", UID: uid(configMap("ns", "b", nil))}},
		{"/apis/apps/v1/namespaces/ns/deployments/d", "", metav1.StatusDetails{Name: "d", Group: "apps", Kind: "deployments", UID: uid(deployment("ns", "d", 1))}},
		{"/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/w", "", metav1.StatusDetails{Name: "w", Group: "test.ctrlkit.io", Kind: "widgets", UID: uid(&Widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}})}},
	} {
		code, ct, body := send(t, c, "DELETE", tc.path, tc.accept, "", nil)
		s := decodeStatus(t, ct, body)
		if code != http.StatusOK || s.Status != metav1.StatusSuccess || s.Details == nil || !reflect.DeepEqual(*s.Details, tc.want) {
			t.Errorf("DELETE %s = %d %s %q, want 200 and a Status Success with details %+v", tc.path, code, ct, body, tc.want)
		}
	}

	podUID := uid(pod.DeepCopy())
	code, ct, body := send(t, c, "DELETE", "/api/v1/namespaces/ns/pods/p", "", "", nil)
	var deleted corev1.Pod
	if err := json.Unmarshal(body, &deleted); err != nil || code != http.StatusOK || ct != "application/json" ||
		deleted.Kind != "Pod" || deleted.Name != "p" || deleted.UID != podUID {
		t.Errorf("DELETE of a Pod = %d %s %s, want 200 and the deleted Pod", code, ct, body)
	}
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "p"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("after DELETE of the Pod, Get: %v, want NotFound", err)
	}
}
