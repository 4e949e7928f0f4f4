package shard_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// TestServerEarlyAcknowledgementIsCaught: in the server-side mode, a
// member that acknowledges a Target epoch (the acknowledged annotation of
// its Lease) while it still reconciles keys it loses under that epoch
// lets the coordinator commit, and the keys' new owner reconciles them at
// the same time; the judge of TestServerProtocol sees it. The bad member
// is played by hand (earlyAcker).
func TestServerEarlyAcknowledgementIsCaught(t *testing.T) {
	cluster := newCluster(t, serverMode)
	rec := &spans{}
	a := startMember(t, cluster, serverMode, "a", rec)
	within(t, "every key on the first member", func() bool { return countOwned(epochOwners(t, cluster), a.mgr.Member()) == protoKeys })
	b := newMember(t, cluster, serverMode, "b", rec)
	keys := uids(t, cluster) // the server-side mode places a key by the hash of its uid
	bad, moving := badName(t, a.mgr.Member(), b.mgr.Member(), func(r shard.Ring, key string) string {
		return r.OwnerOfHash(shard.ServerHash(keys[strings.TrimPrefix(key, protoNS+"/")]))
	})
	t.Logf("%d keys will move from %s to %s: %v", len(moving), bad, b.mgr.Member(), moving)

	acker := &earlyAcker{name: bad, kube: kubernetes.NewForConfigOrDie(cluster.Config()), rec: rec}
	stopBad := holdLease(t, cluster, bad, acker.run)
	within(t, "the bad member reconciling every key it owns", func() bool {
		n := countOwned(epochOwners(t, cluster), bad)
		return n > 0 && int(acker.reconciling.Load()) == n
	})
	b.start(t)
	within(t, "the new member reconciling a key it took from the bad one", func() bool { return rec.reconciledBy(b.mgr.Member(), moving) })
	stopBad() // its Reconciles return, and are judged
	if n := rec.overlaps(t); n == 0 {
		t.Errorf("no overlapping Reconciles: the judge missed the early acknowledgement")
	}
}

// earlyAcker plays a server-side member that acknowledges too early:
// while it holds its member Lease it watches the ring's record and
// acknowledges every Target epoch at once, in its Lease, as a follower
// does only after it drained the keys the Target takes from it. Once a
// committed epoch holds it, it lists the ranges it owns there with a
// shardSelector and reconciles every key listed until it stops, as a
// Reconcile that hangs would.
type earlyAcker struct {
	name        string
	kube        kubernetes.Interface
	rec         *spans
	reconciling atomic.Int32 // keys whose Reconcile runs
}

func (m *earlyAcker) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var acked int64
	listed := false
	for ctx.Err() == nil {
		w, err := m.kube.CoordinationV1().Leases(protoNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + shard.RecordName(protoRing)})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			record, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			e, err := shard.ParseEpochs(record.Annotations)
			if err != nil {
				continue
			}
			if e.Target.N > acked && m.ack(ctx, e.Target.N) == nil {
				acked = e.Target.N
			}
			if !listed && slices.Contains(e.Committed.Members, m.name) {
				listed = m.reconcile(ctx, &wg, e.Committed)
			}
		}
		w.Stop()
	}
}

// ack writes n in the member Lease's acknowledged annotation.
func (m *earlyAcker) ack(ctx context.Context, n int64) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, shard.AckAnnotation, strconv.FormatInt(n, 10))
	_, err := m.kube.CoordinationV1().Leases(protoNS).Patch(ctx, shard.LeaseName(protoRing, m.name), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// reconcile lists what m owns under committed and starts a Reconcile of
// each key, which lasts until ctx ends; false if the list failed.
func (m *earlyAcker) reconcile(ctx context.Context, wg *sync.WaitGroup, committed shard.Epoch) bool {
	sel := shard.Selector(shard.KeyUID, shard.NewRing(committed.Members...).Ranges(m.name))
	list, err := m.kube.CoreV1().ConfigMaps(protoNS).List(ctx, metav1.ListOptions{ShardSelector: sel})
	if err != nil {
		return false
	}
	for _, cm := range list.Items {
		m.reconciling.Add(1)
		wg.Go(func() {
			start := time.Now()
			<-ctx.Done()
			m.rec.add(protoNS+"/"+cm.Name, span{member: m.name, start: start, end: time.Now(), gen: cm.Data["gen"]})
		})
	}
	return true
}
