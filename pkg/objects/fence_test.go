package objects_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// TestWritesFenced runs in a synctest bubble: under the ctx of a term of
// leadership, the write helpers write while the lease is held and send
// nothing once the replica can no longer prove it holds it.
func TestWritesFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kube := fake.NewClientset(configMap("team-a", "web"))
		var unreachable atomic.Bool
		kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if unreachable.Load() {
				return true, nil, errors.New("fake: timeout")
			}
			return false, nil, nil
		})
		lister := newLister[*corev1.ConfigMap](t, kube, nil)
		dyn := newDynamic()
		sites := objects.NewDynamicWriter[*Site](dyn.Resource(siteGVR).Namespace("team-a"), siteGVK)

		e, err := leader.New(kube, leader.Options{Name: "op", Namespace: "team-a", Identity: "a"})
		if err != nil {
			t.Fatal(err)
		}
		leading := make(chan context.Context, 1)
		done := make(chan error, 1)
		go func() {
			done <- e.Run(t.Context(), func(ctx context.Context) error {
				leading <- ctx
				<-ctx.Done()
				return nil
			})
		}()
		ctx := <-leading
		setColor := func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"color": "green"}; return nil }
		if _, res, err := objects.CreateOrUpdate(ctx, lister, kube.CoreV1().ConfigMaps("team-a"), "team-a", "new", setColor); err != nil || res != objects.Created {
			t.Fatalf("CreateOrUpdate while leading = %v, %v; want Created", res, err)
		}

		// The API server stops accepting renewals; the fence closes within
		// RenewDeadline + RetryPeriod.
		unreachable.Store(true)
		time.Sleep(leader.DefaultRenewDeadline + leader.DefaultRetryPeriod)
		if err := <-done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}
		before := writes(kube.Actions(), dyn.Actions())
		site := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
		for name, write := range map[string]func() error{
			"CreateOrUpdate (create)": func() error {
				_, _, err := objects.CreateOrUpdate(ctx, lister, kube.CoreV1().ConfigMaps("team-a"), "team-a", "newer", setColor)
				return err
			},
			"CreateOrUpdate (update)": func() error {
				_, _, err := objects.CreateOrUpdate(ctx, lister, kube.CoreV1().ConfigMaps("team-a"), "team-a", "web", setColor)
				return err
			},
			"DynamicWriter.Create":       func() error { _, err := sites.Create(ctx, site, metav1.CreateOptions{}); return err },
			"DynamicWriter.Update":       func() error { _, err := sites.Update(ctx, site, metav1.UpdateOptions{}); return err },
			"DynamicWriter.UpdateStatus": func() error { _, err := sites.UpdateStatus(ctx, site, metav1.UpdateOptions{}); return err },
		} {
			if err := write(); !errors.Is(err, leader.ErrNotLeader) {
				t.Errorf("%s after the lease was lost = %v, want ErrNotLeader", name, err)
			}
		}
		if after := writes(kube.Actions(), dyn.Actions()); !slices.Equal(after, before) {
			t.Errorf("writes were sent without the lease: %v", after[len(before):])
		}
	})
}

// writes lists the create and update requests to anything but the Lease.
func writes(actions ...[]k8stesting.Action) []string {
	var out []string
	for _, as := range actions {
		for _, a := range as {
			if v := a.GetVerb(); (v == "create" || v == "update") && a.GetResource().Resource != "leases" {
				out = append(out, v+" "+a.GetResource().Resource+a.GetSubresource())
			}
		}
	}
	return out
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
