package objects_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

func TestConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var conds []metav1.Condition
	steps := []struct {
		name        string
		set         metav1.Condition
		wantChanged bool
		wantTime    metav1.Time
	}{
		{"new condition", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", LastTransitionTime: t0}, true, t0},
		{"same again", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", LastTransitionTime: t1}, false, t0},
		{"new reason, same status: time kept", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", LastTransitionTime: t1}, true, t0},
		{"status flips: time moves", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: t1}, true, t1},
	}
	for _, s := range steps {
		if changed := objects.SetCondition(&conds, s.set); changed != s.wantChanged {
			t.Errorf("%s: changed = %v, want %v", s.name, changed, s.wantChanged)
		}
		c := objects.FindCondition(conds, "Ready")
		if c == nil || c.Status != s.set.Status || c.Reason != s.set.Reason || !c.LastTransitionTime.Equal(&s.wantTime) {
			t.Errorf("%s: condition = %+v, want status %s reason %s time %v", s.name, c, s.set.Status, s.set.Reason, s.wantTime)
		}
	}
	if len(conds) != 1 {
		t.Errorf("%d conditions, want 1: %+v", len(conds), conds)
	}
	if !objects.IsConditionTrue(conds, "Ready") || objects.IsConditionTrue(conds, "Progressing") {
		t.Errorf("IsConditionTrue: Ready %v, Progressing %v; want true, false",
			objects.IsConditionTrue(conds, "Ready"), objects.IsConditionTrue(conds, "Progressing"))
	}
	if objects.FindCondition(conds, "Progressing") != nil {
		t.Error("FindCondition found a condition never set")
	}
}
