package shard

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func lease(name, holder, rv string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
}

// TestMembersJudgeByTheirOwnClock: a member is alive for a lease duration
// from the last change this process saw, whatever time its holder wrote.
func TestMembersJudgeByTheirOwnClock(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	m := NewMembers("web", clk)
	longAgo := time.Unix(1, 0) // a holder whose clock is far behind
	if id, ok := m.Observe(lease(LeaseName("web", "a"), "a", "1", longAgo)); !ok || id != "a" {
		t.Fatalf("Observe = %q, %v", id, ok)
	}
	m.Observe(lease(LeaseName("web", "b"), "b", "1", longAgo))
	if _, ok := m.Observe(lease("other-member-c", "c", "1", longAgo)); ok {
		t.Error("a Lease of another ring was taken for a member")
	}
	if got := m.Live(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Live = %q", got)
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	m.Observe(lease(LeaseName("web", "a"), "a", "2", longAgo)) // a renews
	m.Observe(lease(LeaseName("web", "b"), "b", "1", longAgo)) // b does not
	clk.SetTime(clk.Now().Add(6 * time.Second))
	if !m.Alive("a") || m.Alive("b") {
		t.Errorf("16s after b's last renewal: a alive %v, b alive %v; want true, false", m.Alive("a"), m.Alive("b"))
	}
	m.Observe(lease(LeaseName("web", "a"), "", "3", longAgo)) // released
	if m.Alive("a") {
		t.Error("a member that released its Lease is alive")
	}
	m.Observe(lease(LeaseName("web", "c"), "ctrlkit-sharder-buried", "1", longAgo)) // buried by a sharder
	if m.Alive("c") {
		t.Error("a member whose Lease a sharder took is alive")
	}
	m.Forget("a")
	if got := m.Live(); len(got) != 0 {
		t.Errorf("Live = %q, want none", got)
	}
}
