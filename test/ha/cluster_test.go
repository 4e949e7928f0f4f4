//go:build linux

package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Deadlines. Generous, because the machine is shared and the replicas run
// with -race; a passing test never waits for them.
const (
	// waitTimeout bounds waits for something that normally takes well
	// under a second: a process stopping, a replica's caches syncing.
	waitTimeout = 30 * time.Second
)

// eventually polls cond every 20ms until it holds, and fails the test if
// it has not within timeout.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(what, args...))
		}
		<-tick.C
	}
}

// client returns a clientset of the test process with no client-side rate
// limit, and a function that closes every connection it opened. Its own
// dialer keeps it out of client-go's shared transport cache, so closing
// them touches no other client.
func client(t testing.TB) (kubernetes.Interface, func()) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
		return conn, err
	}
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			_ = conn.Close()
		}
		conns = nil
	}
}

// newNamespace creates a namespace for the scenario; it is deleted when
// the test ends (envtest has no namespace controller, so it stays
// Terminating), and its ConfigMaps with it: a sharding scenario's sharder
// labels the ConfigMaps of every namespace, and should not have to label
// those an earlier scenario left.
func newNamespace(t testing.TB, c kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ha-" + prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := c.CoreV1().ConfigMaps(ns.Name).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Logf("deleting the ConfigMaps of %s: %v", ns.Name, err)
		}
		if err := c.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// createObjects creates n ConfigMaps obj-000.. with gen 0, and with the
// observed annotation already at 0 when annotated, so no Reconcile needs
// to write before the churn starts.
func createObjects(t testing.TB, c kubernetes.Interface, ns string, n int, annotated bool) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("obj-%03d", i)
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, n)
	)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: ns}, Data: map[string]string{genKey: "0"}}
				if annotated {
					cm.Annotations = map[string]string{observedKey: "0"}
				}
				_, errs[i] = c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return names
}

// leaseObs is one version of the Lease as the test process saw it.
type leaseObs struct {
	holder      string
	acquire     time.Time // spec.acquireTime, stamped by the holder just before it sent the acquiring write
	renew       time.Time
	transitions int32
}

// acquisition is a holder taking the Lease at acquireTime.
type acquisition struct {
	holder string
	at     time.Time
}

// leaseWatch records every version of one Lease from when it starts,
// listing again whenever the watch ends.
type leaseWatch struct {
	mu  sync.Mutex
	obs []leaseObs
}

// watchLease starts recording the Lease ns/name; the recording stops when
// the test ends.
func watchLease(t testing.TB, c kubernetes.Interface, ns, name string) *leaseWatch {
	lw := &leaseWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	leases := c.CoordinationV1().Leases(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				pause(ctx, 100*time.Millisecond) // the API server is busy: list again
				continue
			}
			for i := range list.Items {
				lw.add(&list.Items[i])
			}
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
			if err != nil {
				pause(ctx, 100*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					lw.add(l)
				}
			}
			w.Stop()
		}
	}()
	return lw
}

// pause waits d or until ctx ends: a back-off between retries of a
// failed request, not a stand-in for a condition.
func pause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

func (lw *leaseWatch) add(l *coordinationv1.Lease) {
	o := leaseObs{}
	if l.Spec.HolderIdentity != nil {
		o.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		o.acquire = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		o.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseTransitions != nil {
		o.transitions = *l.Spec.LeaseTransitions
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if n := len(lw.obs); n > 0 && lw.obs[n-1] == o {
		return // the same version again, after a relist
	}
	lw.obs = append(lw.obs, o)
}

// acquisitions lists every holder change in order: who took the Lease
// and its acquireTime. A release shows as holder "".
func (lw *leaseWatch) acquisitions() []acquisition {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	var out []acquisition
	for _, o := range lw.obs {
		if n := len(out); n > 0 && out[n-1].holder == o.holder && out[n-1].at.Equal(o.acquire) {
			continue
		}
		out = append(out, acquisition{holder: o.holder, at: o.acquire})
	}
	return out
}

// holder is the Lease's current holder as last seen, "" if none.
func (lw *leaseWatch) holder() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.obs) == 0 {
		return ""
	}
	return lw.obs[len(lw.obs)-1].holder
}

// maxRenewGap is the longest time the Lease went unrenewed while held: the
// time between two successive renewTimes of one holder, or from a
// holder's last renewTime to the next holder's acquireTime (or to now,
// for the current holder).
func (lw *leaseWatch) maxRenewGap() time.Duration {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	var gap time.Duration
	for i, o := range lw.obs {
		if o.holder == "" {
			continue
		}
		next := time.Now()
		if i+1 < len(lw.obs) {
			next = lw.obs[i+1].renew
			if n := lw.obs[i+1]; n.holder != o.holder {
				next = n.acquire
			}
		}
		gap = max(gap, next.Sub(o.renew))
	}
	return gap
}

// holderAt is who led at wall time at by acqs: the holder of the last
// acquisition stamped at or before it ("" before the first).
func holderAt(acqs []acquisition, at int64) string {
	h := ""
	for _, a := range acqs {
		if a.at.UnixNano() > at {
			break
		}
		h = a.holder
	}
	return h
}

// churn updates data[genKey] of the objects round-robin at a steady rate
// and remembers the last gen written to each.
type churn struct {
	cancel context.CancelFunc
	done   chan struct{}
	start  time.Time

	mu     sync.Mutex
	last   map[string]int // last gen whose write succeeded
	failed map[string]bool
	errs   []error
	writes int
	end    time.Time
}

// startChurn starts writing to names in ns at rate writes per second, on
// up to 8 requests at a time. Round-robin over hundreds of names never
// has two writes to one name in flight.
func startChurn(t testing.TB, c kubernetes.Interface, ns string, names []string, rate int) *churn {
	ctx, cancel := context.WithCancel(context.Background())
	ch := &churn{cancel: cancel, done: make(chan struct{}), start: time.Now(), last: map[string]int{}, failed: map[string]bool{}}
	next := map[string]int{}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range work {
				ch.mu.Lock()
				next[name]++
				gen := next[name]
				ch.mu.Unlock()
				patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, genKey, strconv.Itoa(gen))
				_, err := c.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
				ch.mu.Lock()
				if err != nil {
					ch.failed[name] = true
					ch.errs = append(ch.errs, err)
				} else {
					ch.last[name] = gen
					ch.writes++
				}
				ch.mu.Unlock()
			}
		})
	}
	go func() {
		defer close(ch.done)
		defer wg.Wait()
		defer close(work)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case <-ctx.Done():
				return
			case work <- names[i%len(names)]:
			}
		}
	}()
	t.Cleanup(ch.stop)
	return ch
}

// stop ends the churn and returns once every write has returned.
func (ch *churn) stop() {
	ch.cancel()
	<-ch.done
	ch.mu.Lock()
	if ch.end.IsZero() {
		ch.end = time.Now()
	}
	ch.mu.Unlock()
}

// rate is the writes per second achieved.
func (ch *churn) rate() float64 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return float64(ch.writes) / ch.end.Sub(ch.start).Seconds()
}

// lostObjects lists the objects not converged on the server: the observed
// annotation differs from data[genKey], or data[genKey] is not the churn
// driver's last successful write (unless a write to it failed, which may
// or may not have been applied).
func lostObjects(ctx context.Context, c kubernetes.Interface, ns string, names []string, ch *churn) ([]string, error) {
	list, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byName := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var lost []string
	for _, name := range names {
		cm := byName[name]
		switch {
		case cm == nil:
			lost = append(lost, name+" (gone)")
		case cm.Annotations[observedKey] != cm.Data[genKey]:
			lost = append(lost, fmt.Sprintf("%s (gen %s, observed %q)", name, cm.Data[genKey], cm.Annotations[observedKey]))
		case !ch.failed[name] && cm.Data[genKey] != strconv.Itoa(ch.last[name]):
			lost = append(lost, fmt.Sprintf("%s (gen %s on the server, the driver's last write was %d)", name, cm.Data[genKey], ch.last[name]))
		}
	}
	return lost, nil
}

func (a acquisition) String() string {
	return fmt.Sprintf("%q at %s", a.holder, a.at.Format("15:04:05.000000"))
}
