package leader

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fencedLock is the Lease lock client-go's elector uses during one Run,
// keeping the records fencing needs: when the last successful write naming
// this replica was sent, and whether a read showed another holder since.
// client-go calls it from one goroutine at a time.
type fencedLock struct {
	resourcelock.Interface
	e        *Elector
	acquired atomic.Bool // a write naming this replica succeeded during this Run
}

var _ resourcelock.Interface = (*fencedLock)(nil)

// Get reads the Lease. A record that does not name this replica closes the
// fence at once: another replica took the lease (or it was released).
//
// client-go reads the Lease before writing it only on its slow path: a
// leader reads it when the optimistic update of the record it last saw
// failed, which leader_election_slowpath_total counts.
func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.e.IsLeader() {
		l.e.slowpaths.Add(1)
	}
	rec, raw, err := l.Interface.Get(ctx)
	l.e.access(err)
	if err == nil {
		l.e.observe(rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create creates the Lease; see Update.
func (l *fencedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(rec, func() error { return l.Interface.Create(ctx, rec) })
}

// Update writes the Lease. A success that names this replica moves the
// fence to RenewDeadline + RetryPeriod after the moment the request was
// sent: the API server stored the renewal no earlier than that, so no
// standby can take the lease sooner than LeaseDuration after it.
func (l *fencedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(rec, func() error { return l.Interface.Update(ctx, rec) })
}

func (l *fencedLock) write(rec resourcelock.LeaderElectionRecord, send func() error) error {
	sent := time.Now() // with the monotonic reading
	err := send()
	l.e.access(err)
	if err == nil && rec.HolderIdentity == l.e.opts.Identity {
		l.acquired.Store(true)
		l.e.renewed(sent)
	}
	return err
}

// renewed records a successful write naming this replica, sent at sent.
func (e *Elector) renewed(sent time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if sent.After(e.renewedAt) {
		e.renewedAt = sent
	}
	e.lost = nil
	e.holder = e.opts.Identity
}

// observe records the holder a read of the Lease returned. Another holder
// than this replica ends the current term.
func (e *Elector) observe(holder string) {
	e.mu.Lock()
	prev := e.holder
	e.holder = holder
	if holder == e.opts.Identity {
		e.mu.Unlock()
		return
	}
	if e.lost == nil {
		who := fmt.Sprintf("held by %q", holder)
		if holder == "" {
			who = "released"
		}
		e.lost = fmt.Errorf("%w: the Lease %s is %s", ErrLeaseLost, e.lease(), who)
	}
	lost, t := e.lost, e.term
	e.mu.Unlock()
	if holder != prev && holder != "" {
		e.opts.Logger.Info("New leader observed", "lease", e.lease(), "leader", holder, "previous", prev, "identity", e.opts.Identity)
	}
	if t != nil {
		t.lose(lost)
	}
}

// access records whether the API server let this replica use the Lease,
// and logs the start and end of a refusal: a replica that may not use the
// Lease campaigns in vain, so the error says which permission to grant.
func (e *Elector) access(err error) {
	// A success, every renewal, is told apart before apierrors' tests,
	// which allocate even for a nil error.
	refused := err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err))
	allowed := err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	e.mu.Lock()
	first := refused && e.denied.IsZero()
	restored := allowed && !e.denied.IsZero()
	switch {
	case first:
		e.denied, e.deniedErr = time.Now(), err
	case refused:
		e.deniedErr = err
	case restored:
		e.denied, e.deniedErr = time.Time{}, nil
	}
	var fix string
	if first {
		fix = e.deniedFix() // not per renewal: it formats
	}
	e.mu.Unlock()
	switch {
	case first:
		e.opts.Logger.Error(err, "The API server refuses this replica the Lease: it cannot lead until this is fixed; /healthz fails if it lasts",
			"lease", e.lease(), "identity", e.opts.Identity, "fix", fix, "unhealthyAfter", e.opts.LeaseDuration+e.opts.RenewDeadline)
	case restored:
		e.opts.Logger.Info("The API server allows this replica the Lease again", "lease", e.lease(), "identity", e.opts.Identity)
	}
}

// deniedFix says how to end a refusal; e.mu is held.
func (e *Elector) deniedFix() string {
	if apierrors.IsUnauthorized(e.deniedErr) {
		return "the API server does not accept this replica's credentials (401): check its service account token or kubeconfig"
	}
	return fmt.Sprintf("grant this replica's service account the verbs get, create and update on leases (apiGroups: [coordination.k8s.io]) in namespace %q, with a Role and a RoleBinding", e.opts.Namespace)
}

// release clears the lease so a standby takes over at once, as client-go's
// ReleaseOnCancel does, if this replica still holds it. Run calls it only
// after the leading function returned nil.
func (e *Elector) release(l *fencedLock) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.RenewDeadline)
	defer cancel()
	for range 3 { // a conflict means a renewal raced the release: read again
		rec, _, err := l.Get(ctx)
		if err != nil || rec.HolderIdentity != e.opts.Identity {
			if err != nil {
				e.opts.Logger.Error(err, "Cannot release the lease; standbys take it when it expires", "lease", e.lease())
			}
			return
		}
		now := metav1.NewTime(time.Now())
		err = l.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    rec.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
		if err == nil {
			e.opts.Logger.Info("Released leadership on shutdown", "lease", e.lease(), "identity", e.opts.Identity)
			return
		}
		if !apierrors.IsConflict(err) {
			e.opts.Logger.Error(err, "Cannot release the lease; standbys take it when it expires", "lease", e.lease())
			return
		}
	}
}
