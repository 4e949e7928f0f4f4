package shard

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// writeLog numbers the Lease writes a fake clientset receives, so a test
// can check their order without sleeping.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, s)
}

// index returns the position of the first write for which match holds,
// or -1.
func (w *writeLog) index(match func(string) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range w.writes {
		if match(s) {
			return i
		}
	}
	return -1
}

func (w *writeLog) is(s string) func(string) bool { return func(x string) bool { return x == s } }

// TestCoordinator: over a fake clientset, the coordinator proposes the
// live members, commits a new member's epoch only after every member of
// the committed epoch acknowledged it, and commits one without a dead
// member only after burying that member's Lease.
func TestCoordinator(t *testing.T) {
	e := &sharderEnv{t: t, kube: kubefake.NewClientset(), clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	log := &writeLog{}
	e.kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		switch {
		case l.Name == RecordName("web"):
			log.add("record " + l.Annotations[committedAnnotation] + " / " + l.Annotations[targetAnnotation])
		case *l.Spec.HolderIdentity != "" && l.Name != LeaseName("web", *l.Spec.HolderIdentity):
			log.add("bury " + l.Name)
		case l.Annotations[ackAnnotation] != "":
			log.add("ack " + l.Name + " " + l.Annotations[ackAnnotation])
		}
		return false, nil, nil
	})
	e.kube.PrependReactor("patch", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p := a.(k8stesting.PatchAction); strings.Contains(string(p.GetPatch()), `"holderIdentity":"ctrlkit-sharder-buried"`) {
			log.add("bury " + p.GetName())
		}
		return false, nil, nil
	})
	leases := e.kube.CoordinationV1().Leases("leases")
	if _, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leases", Name: RecordName("web")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	record := func() string {
		l, err := leases.Get(t.Context(), RecordName("web"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Annotations[committedAnnotation] + " / " + l.Annotations[targetAnnotation]
	}
	ack := func(member string, n string) {
		t.Helper()
		l, err := leases.Get(t.Context(), LeaseName("web", member), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Annotations = map[string]string{ackAnnotation: n}
		if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.renew("a")
	e.renew("b")

	c, err := newRingCoordinator(ringCoordinatorOptions{Ring: "web", Namespace: "leases", Kube: e.kube, Clock: e.clock, Interval: time.Second, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := c.Start(ctx); err != nil {
			t.Error(err)
		}
	})
	eventuallyT(t, "the first epoch committed", func() bool { return record() == "1 a,b / 1 a,b" })

	e.renew("c")
	eventuallyT(t, "epoch 2 proposed", func() bool { return record() == "1 a,b / 2 a,b,c" })
	ack("a", "2")
	ack("c", "2") // a member new in the target owes nothing
	ack("b", "2")
	eventuallyT(t, "epoch 2 committed", func() bool { return record() == "2 a,b,c / 2 a,b,c" })
	if commit, lastAck := log.index(log.is("record 2 a,b,c / 2 a,b,c")), log.index(log.is("ack web-member-b 2")); commit < lastAck {
		t.Errorf("epoch 2 committed (write %d) before b acknowledged it (write %d): %q", commit, lastAck, log.writes)
	}

	// b dies: a and c renew every half second of the fake clock as it
	// runs past b's lease, so that however late the coordinator sees a
	// renewal, theirs never look expired.
	var target string
	eventuallyT(t, "an epoch proposed without b", func() bool {
		e.renew("a")
		e.renew("c")
		e.clock.Step(500 * time.Millisecond)
		l, err := leases.Get(t.Context(), RecordName("web"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		target = l.Annotations[targetAnnotation]
		return strings.HasSuffix(target, " a,c")
	})
	n, _, _ := strings.Cut(target, " ")
	ack("a", n)
	ack("c", n)
	eventuallyT(t, "that epoch committed", func() bool { return record() == target+" / "+target })
	burial, commit := log.index(log.is("bury web-member-b")), log.index(log.is("record "+target+" / "+target))
	if burial < 0 || commit < burial {
		t.Errorf("epoch %s committed (write %d) before b's Lease was buried (write %d): %q", target, commit, burial, log.writes)
	}
}
