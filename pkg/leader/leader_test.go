package leader_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

func TestNewValidates(t *testing.T) {
	client := fake.NewClientset()
	ok := leader.Options{Name: "op", Namespace: "ns", Identity: "a"}
	tests := []struct {
		name    string
		mutate  func(*leader.Options)
		wantErr string // empty: no error
	}{
		{"defaults", func(*leader.Options) {}, ""},
		{"short test timings", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 250*time.Millisecond
		}, ""},
		{"no name", func(o *leader.Options) { o.Name = "" }, "Options.Name is empty"},
		{"lease not longer than renew deadline", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline = 10*time.Second, 10*time.Second
		}, "LeaseDuration (10s) must be greater than Options.RenewDeadline (10s)"},
		{"renew deadline within jitter of retry", func(o *leader.Options) {
			o.RenewDeadline, o.RetryPeriod = 2*time.Second, 2*time.Second
		}, "RenewDeadline (2s) must be greater than 1.2 × Options.RetryPeriod (2s)"},
		{"negative", func(o *leader.Options) { o.RetryPeriod = -time.Second }, "must not be negative"},
		{"no namespace outside a cluster", func(o *leader.Options) { o.Namespace = "" }, "Options.Namespace is empty and this process is not in a cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			e, err := leader.New(client, o)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if e.Identity() != o.Identity {
					t.Fatalf("Identity = %q, want %q", e.Identity(), o.Identity)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaultIdentityIsUnique(t *testing.T) {
	client := fake.NewClientset()
	a, err := leader.New(client, leader.Options{Name: "op", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.New(client, leader.Options{Name: "op", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Identity() == b.Identity() || !strings.Contains(a.Identity(), "_") {
		t.Fatalf("identities %q and %q: want hostname_suffix, distinct", a.Identity(), b.Identity())
	}
	o := a.Options()
	if o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second {
		t.Fatalf("defaults = %v/%v/%v, want 15s/10s/2s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
}
