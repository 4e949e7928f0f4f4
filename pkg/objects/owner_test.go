package objects_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

func TestSetControllerReference(t *testing.T) {
	site := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-1"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-ns"}}
	nsGVK := corev1.SchemeGroupVersion.WithKind("Namespace")
	controllerRef := func(apiVersion, kind, name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: k8stypes.UID(uid), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	}
	siteRef := controllerRef("test.ctrlkit.io/v1", "Site", "web", "uid-1")
	otherOwner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg", UID: "uid-cm"}

	tests := []struct {
		name     string
		owner    metav1.Object
		ownerGVK schema.GroupVersionKind
		child    metav1.ObjectMeta
		want     []metav1.OwnerReference
		wantErr  string // substring; empty means success
		wantIs   error
	}{
		{name: "new child", owner: site, ownerGVK: siteGVK, child: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
			want: []metav1.OwnerReference{siteRef}},
		{name: "again: unchanged", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{siteRef}},
			want:  []metav1.OwnerReference{siteRef}},
		{name: "other owners kept", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{otherOwner}},
			want:  []metav1.OwnerReference{otherOwner, siteRef}},
		{name: "recreated owner: UID refreshed in place", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{
				otherOwner, controllerRef("test.ctrlkit.io/v0", "Site", "web", "uid-old")}},
			want: []metav1.OwnerReference{otherOwner, siteRef}},
		{name: "non-controller reference to the owner becomes the controller", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "test.ctrlkit.io/v1", Kind: "Site", Name: "web", UID: "uid-1"}}},
			want: []metav1.OwnerReference{siteRef}},
		{name: "another controller", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{
				controllerRef("apps/v1", "ReplicaSet", "web-1", "uid-rs")}},
			wantErr: `controlled by ReplicaSet "web-1"`, wantIs: objects.ErrAlreadyControlled},
		{name: "same name, other group is another controller", owner: site, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web", OwnerReferences: []metav1.OwnerReference{
				controllerRef("other.io/v1", "Site", "web", "uid-x")}},
			wantIs: objects.ErrAlreadyControlled, wantErr: "cannot control"},
		{name: "cluster-scoped owner, namespaced child", owner: ns, ownerGVK: nsGVK, child: metav1.ObjectMeta{Namespace: "team-a", Name: "cfg"},
			want: []metav1.OwnerReference{controllerRef("v1", "Namespace", "team-a", "uid-ns")}},
		{name: "cluster-scoped owner and child", owner: ns, ownerGVK: nsGVK, child: metav1.ObjectMeta{Name: "pv"},
			want: []metav1.OwnerReference{controllerRef("v1", "Namespace", "team-a", "uid-ns")}},
		{name: "namespaced owner, cluster-scoped child", owner: site, ownerGVK: siteGVK, child: metav1.ObjectMeta{Name: "pv"},
			wantErr: "cluster-scoped"},
		{name: "cross-namespace", owner: site, ownerGVK: siteGVK, child: metav1.ObjectMeta{Namespace: "team-b", Name: "web"},
			wantErr: "do not cross namespaces"},
		{name: "owner without UID", owner: &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}, ownerGVK: siteGVK,
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, wantErr: "no name or UID"},
		{name: "owner kind missing", owner: site, ownerGVK: schema.GroupVersionKind{Group: "test.ctrlkit.io", Version: "v1"},
			child: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, wantErr: "lacks a kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &appsv1.Deployment{ObjectMeta: tt.child}
			before := child.DeepCopy()
			err := objects.SetControllerReference(tt.owner, child, tt.ownerGVK)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
				}
				if !equality.Semantic.DeepEqual(child, before) {
					t.Errorf("child changed on error: %+v", child.OwnerReferences)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(child.OwnerReferences, tt.want) {
				t.Errorf("ownerReferences =\n  %+v\nwant\n  %+v", child.OwnerReferences, tt.want)
			}
			if c := metav1.GetControllerOf(child); c == nil || c.UID != tt.owner.GetUID() {
				t.Errorf("controller = %+v, want the owner", c)
			}
		})
	}
}
