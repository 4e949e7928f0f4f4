package leader_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Timings of most tests: the fence closes RenewDeadline + RetryPeriod =
// 12s after the last renewal; a standby may take over 15s after it.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	fenceBound    = renewDeadline + retryPeriod
)

var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// api is a fake API server for the Lease, whose faults a test switches on
// and off. Its reactors run under the fake clientset's lock.
type api struct {
	kube *fake.Clientset

	mu      sync.Mutex
	fail    error         // every Lease request fails with it
	hang    chan struct{} // Lease updates block until it is closed
	thief   string        // holds the Lease: updates naming anyone else conflict
	reads   []read        // every Get of the Lease that succeeded
	updates int           // Lease updates that reached the tracker
}

type read struct {
	at     time.Time
	holder string
}

func newAPI() *api {
	a := &api{kube: fake.NewClientset()}
	// Reactors run last-prepended first: faults, then reads, then the tracker.
	a.kube.PrependReactor("get", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := a.kube.Tracker().Get(leases.WithVersion("v1"), action.GetNamespace(), action.(k8stesting.GetAction).GetName())
		if err == nil {
			a.mu.Lock()
			a.reads = append(a.reads, read{at: time.Now(), holder: ptrString(obj.(*coordinationv1.Lease).Spec.HolderIdentity)})
			a.mu.Unlock()
		}
		return true, obj, err
	})
	a.kube.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		fail, hang, thief := a.fail, a.hang, a.thief
		a.mu.Unlock()
		switch {
		case fail != nil:
			return true, nil, fail
		case action.GetVerb() == "update" && hang != nil:
			<-hang
			return true, nil, errors.New("fake: the request hung until the connection broke")
		case action.GetVerb() == "update" && thief != "":
			l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != thief {
				return true, nil, apierrors.NewConflict(leases, l.Name, errors.New("the object has been modified"))
			}
		}
		if action.GetVerb() == "update" {
			a.mu.Lock()
			a.updates++
			a.mu.Unlock()
		}
		return false, nil, nil
	})
	return a
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (a *api) set(f func(a *api)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a)
}

// steal makes thief the Lease's holder, as a standby that took it over
// does, and makes this replica's renewals conflict from now on.
func (a *api) steal(t *testing.T, thief string) {
	t.Helper()
	l, err := a.kube.CoordinationV1().Leases("ns").Get(context.Background(), "op", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease to steal it: %v", err)
	}
	a.set(func(a *api) { a.thief = thief })
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &thief, &now, &now
	if _, err := a.kube.CoordinationV1().Leases("ns").Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("stealing the Lease: %v", err)
	}
}

// holder is who the Lease names now.
func (a *api) holder(t *testing.T) string {
	t.Helper()
	obj, err := a.kube.Tracker().Get(leases.WithVersion("v1"), "ns", "op")
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return ptrString(obj.(*coordinationv1.Lease).Spec.HolderIdentity)
}

// firstReadOf returns when a Get first returned holder.
func (a *api) firstReadOf(holder string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.reads {
		if r.holder == holder {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// logs records what a logger received, one line per call.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 4})
}

// count returns how many lines contain every one of subs.
func (l *logs) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// options are the Options of replica "a" of Lease ns/op.
func options(l *logs) leader.Options {
	return leader.Options{
		Name: "op", Namespace: "ns", Identity: "a",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Logger: l.logger(),
	}
}

func newElector(t *testing.T, a *api, opts leader.Options) *leader.Elector {
	t.Helper()
	e, err := leader.New(a.kube, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// campaign is a Run in progress, whose leading function reports its
// context and returns what the test tells it to.
type campaign struct {
	cancel  context.CancelCauseFunc
	done    chan error
	leading chan context.Context // each term's leading context
	ret     chan error           // what the leading function returns, once its ctx ends
}

// start runs e.Run in a goroutine. The leading function sends its context
// on leading, waits for it to end and returns what is sent on ret.
func start(t *testing.T, e *leader.Elector) *campaign {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	c := &campaign{cancel: cancel, done: make(chan error, 1), leading: make(chan context.Context, 1), ret: make(chan error, 1)}
	go func() {
		c.done <- e.Run(ctx, func(ctx context.Context) error {
			c.leading <- ctx
			<-ctx.Done()
			return <-c.ret
		})
	}()
	return c
}
