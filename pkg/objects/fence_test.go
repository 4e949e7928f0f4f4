package objects_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// TestWritesFenced runs in a synctest bubble: under the ctx of a term of
// leadership, CreateOrUpdate and the client's writes write while the lease
// is held and send nothing once the replica can no longer prove it holds
// it.
func TestWritesFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}},
			&Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "blog"}, Spec: SiteSpec{Image: "nginx:1.26"}},
		)
		cms := lister[*corev1.ConfigMap](t, e)

		// The elector's own client reaches the fake through a transport that
		// fails every Lease renewal once the API server is unreachable.
		var unreachable atomic.Bool
		leaseCfg := e.cluster.Config()
		leaseCfg.Transport = roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if unreachable.Load() && req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/leases") {
				return nil, errors.New("fake: timeout")
			}
			return e.cluster.RoundTrip(req)
		})
		el, err := leader.NewForConfig(leaseCfg, leader.Options{Name: "op", Namespace: "team-a", Identity: "a"})
		if err != nil {
			t.Fatal(err)
		}
		leading := make(chan context.Context, 1)
		done := make(chan error, 1)
		go func() {
			done <- el.Run(t.Context(), func(ctx context.Context) error {
				leading <- ctx
				<-ctx.Done()
				return nil
			})
		}()
		ctx := <-leading
		setColor := func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"color": "green"}; return nil }
		if _, res, err := objects.CreateOrUpdate(ctx, e.client, cms, "team-a", "new", setColor); err != nil || res != objects.Created {
			t.Fatalf("CreateOrUpdate while leading = %v, %v; want Created", res, err)
		}
		if w := writes(e.cluster); !slices.Equal(w, []string{"create configmaps"}) {
			t.Fatalf("writes while leading = %q, want the create", w)
		}

		// The API server stops accepting renewals; the fence closes within
		// RenewDeadline + RetryPeriod.
		unreachable.Store(true)
		time.Sleep(leader.DefaultRenewDeadline + leader.DefaultRetryPeriod)
		if err := <-done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}
		if err := leader.CheckLeading(ctx); !errors.Is(err, leader.ErrNotLeader) {
			t.Fatalf("CheckLeading after the lease was lost = %v, want ErrNotLeader", err)
		}
		e.cluster.ResetWrites()
		web := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, Spec: SiteSpec{Image: "nginx:1.27"}}
		var blog Site
		if err := e.cluster.Get(types.NamespacedName{Namespace: "team-a", Name: "blog"}, &blog); err != nil {
			t.Fatal(err)
		}
		blog.Spec.Image = "nginx:1.27"
		objects.SetCondition(&blog.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"})
		// The leading ctx is cancelled by now, which client-go refuses to
		// send with; a ctx of the term that is not cancelled (a process
		// whose timers have not run since a pause) is refused by the fence.
		lost := ctx
		ctx = context.WithoutCancel(lost)
		for name, write := range map[string]func() error{
			"CreateOrUpdate (create)": func() error {
				_, _, err := objects.CreateOrUpdate(ctx, e.client, cms, "team-a", "newer", setColor)
				return err
			},
			"CreateOrUpdate (update)": func() error {
				_, _, err := objects.CreateOrUpdate(ctx, e.client, cms, "team-a", "web", setColor)
				return err
			},
			"Client.Create":        func() error { return e.client.Create(ctx, web.DeepCopyObject().(*Site)) },
			"Client.Update":        func() error { return e.client.Update(ctx, blog.DeepCopyObject().(*Site)) },
			"Client.Status.Update": func() error { return e.client.Status().Update(ctx, blog.DeepCopyObject().(*Site)) },
		} {
			if err := write(); !errors.Is(err, leader.ErrNotLeader) {
				t.Errorf("%s after the lease was lost = %v, want ErrNotLeader", name, err)
			}
		}
		ctx = lost
		if err := e.client.Create(ctx, web.DeepCopyObject().(*Site)); err == nil {
			t.Error("Client.Create with the cancelled leading ctx succeeded")
		}
		if w := writes(e.cluster); len(w) > 0 {
			t.Errorf("writes were sent without the lease: %q", w)
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
