package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestListWatch: tweak changes the options of every list and watch, and a
// failed list returns a nil interface, not a typed nil.
func TestListWatch(t *testing.T) {
	var seen []metav1.ListOptions
	fail := false
	lw := ListWatch(func(o *metav1.ListOptions) { o.LabelSelector = "app=web" },
		func(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
			seen = append(seen, o)
			if fail {
				return nil, errors.New("boom")
			}
			return &corev1.SecretList{}, nil
		},
		func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			seen = append(seen, o)
			return watch.NewEmptyWatch(), nil
		})
	ctx := t.Context()
	if l, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 5}); err != nil || l == nil {
		t.Fatalf("list = %v, %v", l, err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if len(seen) != 2 || seen[0].LabelSelector != "app=web" || seen[0].Limit != 5 || seen[1].LabelSelector != "app=web" || seen[1].ResourceVersion != "7" {
		t.Fatalf("options sent: %+v", seen)
	}
	fail = true
	if l, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err == nil || l != nil {
		t.Fatalf("a failed list returned %#v, %v; want a nil object and the error", l, err)
	}
}
