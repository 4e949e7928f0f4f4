package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// TestPriorityOf pins down which events wait behind real changes: the
// initial list, and resyncs that changed nothing, go at PriorityLow, so
// that after a restart a change to one object is not queued behind the
// reconcile of every object (the queue's starvation bound keeps the
// backlog moving).
func TestPriorityOf(t *testing.T) {
	at := func(rv string) metav1.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name string
		ev   informer.Event
		want workqueue.Priority
	}{
		{"add from the initial list", informer.Event{Type: informer.Added, Object: at("1"), InitialList: true}, workqueue.PriorityLow},
		{"add after the initial list", informer.Event{Type: informer.Added, Object: at("1")}, workqueue.PriorityNormal},
		{"resync: update with the same resourceVersion", informer.Event{Type: informer.Updated, Old: at("1"), Object: at("1")}, workqueue.PriorityLow},
		{"real update", informer.Event{Type: informer.Updated, Old: at("1"), Object: at("2")}, workqueue.PriorityNormal},
		{"delete", informer.Event{Type: informer.Deleted, Object: at("2")}, workqueue.PriorityNormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := priorityOf(tc.ev); got != tc.want {
				t.Errorf("priorityOf = %v, want %v", got, tc.want)
			}
		})
	}
}
