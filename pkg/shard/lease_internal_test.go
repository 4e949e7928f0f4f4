package shard

import (
	"testing"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestBurial: burying a member from the Lease a sharder's store holds
// changes the holder alone, on the condition that the Lease is as the
// store saw it (its resourceVersion): the labels, annotations and owners
// of the Lease stay.
func TestBurial(t *testing.T) {
	full := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "leases", Name: LeaseName("web", "a"), ResourceVersion: "7",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"note": "kept"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "u1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "web", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](4),
			RenewTime: &metav1.MicroTime{Time: metav1.Now().Time}},
	}

	kube := kubefake.NewClientset(full.DeepCopy())
	var patches []string
	kube.PrependReactor("patch", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(full.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := buryMember(t.Context(), kube, store, "leases", "web", "a", logr.Discard()); err != nil {
		t.Fatalf("buryMember: %v", err)
	}
	got, err := kube.CoordinationV1().Leases("leases").Get(t.Context(), full.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.HolderIdentity != buriedHolder {
		t.Errorf("holder after the burial = %q, want %q", *got.Spec.HolderIdentity, buriedHolder)
	}
	// The condition is the API server's, as for the label patches: a
	// fake clientset does not check it.
	want := `{"metadata":{"resourceVersion":"7"},"spec":{"holderIdentity":"ctrlkit-sharder-buried"}}`
	if len(patches) != 1 || patches[0] != want {
		t.Errorf("burial patches %q, want one: %s", patches, want)
	}
	if got.Labels["app"] != "web" || got.Annotations["note"] != "kept" || len(got.OwnerReferences) != 1 || *got.Spec.LeaseDurationSeconds != 4 {
		t.Errorf("the burial changed more than the holder: %+v", got)
	}
}
