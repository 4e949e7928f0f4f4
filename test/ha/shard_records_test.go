//go:build linux

package ha

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// Ownership. A key belongs to the member named by its object's shard
// label, draining or not, from the moment the API server received the
// write that set the label until it received the write that changed it
// (the owner's acknowledgement, or the sharder's reassignment of a dead
// or departed member's key). Both bounds are lenient, and right: the new
// owner cannot act before the write that labelled the object for it took
// effect, which is after the server received it; the old owner sends its
// acknowledgement only after its last Reconcile of the key returned, and
// a dead member's keys are reassigned only after it stopped. Every label
// write is a PATCH by a replica (the sharder's merge patches, the owners'
// JSON patches), which the audit policy logs with the object the server
// answered (audit_test.go): its resourceVersion and labels, and when the
// server received the write. The test's own watch of the objects
// (labelWatch) must find each label change it saw in that history.

// labelObs is one version of an object's shard labels as the test's watch
// saw it.
type labelObs struct {
	rv       uint64
	owner    string // the shard label: the owning member, "" for none
	draining bool   // the drain label is set
	seen     time.Time
}

// labelWatch records the shard labels of every ConfigMap of a namespace,
// version by version, listing again whenever the watch ends.
type labelWatch struct {
	ring string

	mu   sync.Mutex
	hist map[string][]labelObs // by object name, in the order seen
}

// watchLabels starts recording the labels of ring on the ConfigMaps of
// ns; the recording stops when the test ends.
func watchLabels(t testing.TB, c kubernetes.Interface, ns, ring string) *labelWatch {
	lw := &labelWatch{ring: ring, hist: map[string][]labelObs{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	cms := c.CoreV1().ConfigMaps(ns)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				pause(ctx, 100*time.Millisecond) // the API server is busy: list again
				continue
			}
			for i := range list.Items {
				lw.add(&list.Items[i])
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				pause(ctx, 100*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					lw.add(cm)
				}
			}
			w.Stop()
		}
	}()
	return lw
}

func (lw *labelWatch) add(cm *corev1.ConfigMap) {
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("resourceVersion %q of %s is not a number: the judges order versions by it", cm.ResourceVersion, cm.Name))
	}
	o := labelObs{rv: rv, owner: cm.Labels[shard.ShardLabel(lw.ring)], draining: cm.Labels[shard.DrainLabel(lw.ring)] != "", seen: time.Now()}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	h := lw.hist[cm.Name]
	if n := len(h); n > 0 && h[n-1].rv >= rv {
		return // seen already, before a relist
	}
	lw.hist[cm.Name] = append(h, o)
}

// current is the last version seen of every object.
func (lw *labelWatch) current() map[string]labelObs {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	out := make(map[string]labelObs, len(lw.hist))
	for name, h := range lw.hist {
		out[name] = h[len(h)-1]
	}
	return out
}

// history is a copy of every version seen, by object name.
func (lw *labelWatch) history() map[string][]labelObs {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	out := make(map[string][]labelObs, len(lw.hist))
	for name, h := range lw.hist {
		out[name] = slices.Clone(h)
	}
	return out
}

// labelEvent is one label write as the API server's audit log shows it:
// the labels of the object it answered with.
type labelEvent struct {
	name      string
	rv        uint64
	owner     string
	draining  bool
	replica   string    // who sent it
	received  time.Time // when the server received it: before it took effect
	completed time.Time // when the server answered: after
}

// labelAudit is the part of an audit.k8s.io/v1 Event that labelEvents
// reads.
type labelAudit struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	ResponseObject *struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
	} `json:"responseObject"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// labelEvents reads from the audit log every successful PATCH a replica
// sent to a ConfigMap of ns, with the labels of ring it left, ordered by
// object name and resourceVersion.
func labelEvents(ns, ring string) ([]labelEvent, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []labelEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"patch"`)) {
			continue // most lines: not worth decoding
		}
		var ev labelAudit
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", auditLog, err)
		}
		replica, ok := strings.CutPrefix(ev.UserAgent, userAgentPrefix)
		if !ok || ev.Verb != "patch" || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "configmaps" ||
			ev.ObjectRef.Namespace != ns || ev.ResponseStatus == nil || ev.ResponseStatus.Code/100 != 2 || ev.ResponseObject == nil {
			continue
		}
		md := ev.ResponseObject.Metadata
		rv, err := strconv.ParseUint(md.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: resourceVersion %q of %s: %w", auditLog, md.ResourceVersion, ev.ObjectRef.Name, err)
		}
		out = append(out, labelEvent{name: ev.ObjectRef.Name, rv: rv, owner: md.Labels[shard.ShardLabel(ring)],
			draining: md.Labels[shard.DrainLabel(ring)] != "", replica: strings.SplitN(replica, "/", 2)[0],
			received: ev.RequestReceivedTimestamp, completed: ev.StageTimestamp})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b labelEvent) int { return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.rv, b.rv)) })
	return out, nil
}

// unexplained lists the label changes the test's watch saw for which the
// audit log has no write: versions whose labels differ from the version
// the watch saw before, with no label event at that resourceVersion
// showing the same labels. Empty means the ownership judge saw every
// change the watch saw.
func unexplained(hist map[string][]labelObs, events []labelEvent) []string {
	byVersion := map[string]labelEvent{}
	for _, e := range events {
		byVersion[e.name+"@"+strconv.FormatUint(e.rv, 10)] = e
	}
	var out []string
	for name, h := range hist {
		prev := labelObs{}
		for _, o := range h {
			if o.owner != prev.owner || o.draining != prev.draining {
				e, ok := byVersion[name+"@"+strconv.FormatUint(o.rv, 10)]
				if !ok || e.owner != o.owner || e.draining != o.draining {
					out = append(out, fmt.Sprintf("%s at resourceVersion %d: owner %q, draining %v", name, o.rv, o.owner, o.draining))
				}
			}
			prev = o
		}
	}
	slices.Sort(out)
	return out
}

// tenure is a member's ownership of one key, [from, to] in Unix ns.
type tenure struct {
	member   string
	from, to int64 // to is math.MaxInt64 while it lasts
}

// tenures turns the label events of each object, ordered by
// resourceVersion, into the tenures of its owners, by object name.
func tenures(events []labelEvent) map[string][]tenure {
	out := map[string][]tenure{}
	owner := map[string]string{}
	for _, e := range events {
		cur := owner[e.name]
		if e.owner == cur {
			continue // a drain, or a write that left the owner as it was
		}
		at := e.received.UnixNano()
		if ts := out[e.name]; cur != "" && len(ts) > 0 {
			ts[len(ts)-1].to = at
		}
		if e.owner != "" {
			out[e.name] = append(out[e.name], tenure{member: e.owner, from: at, to: math.MaxInt64})
		}
		owner[e.name] = e.owner
	}
	return out
}

// owned reports whether member owned key at wall time at.
func owned(ten map[string][]tenure, key, member string, at int64) bool {
	for _, t := range ten[key] {
		if t.member == member && t.from <= at && at <= t.to {
			return true
		}
	}
	return false
}

// notOwned lists the records of kind by which a replica acted on a key it
// did not own at the time: kindStart, a Reconcile started; kindWrite, a
// ConfigMap write the probe sent (PATCHes are the sharder's and the
// acknowledgements' label writes, judged by the tenures themselves; a
// write whose ctx was done before it reached the transport was not sent).
// members maps each replica to its member name.
func notOwned(recs []record, members map[string]string, ten map[string][]tenure, kind string) []record {
	var out []record
	for _, r := range recs {
		if r.Kind != kind || (kind == kindWrite && (r.Result != "configmaps" || r.Unsent || r.Verb == "PATCH")) {
			continue
		}
		if !owned(ten, r.Key, members[r.Replica], r.Wall) {
			out = append(out, r)
		}
	}
	return out
}

// describeNotOwned is a record of notOwned for a failure message: who
// owned the key then.
func describeNotOwned(r record, members map[string]string, ten map[string][]tenure) string {
	owner := "nobody"
	for _, t := range ten[r.Key] {
		if t.from <= r.Wall && r.Wall <= t.to {
			owner = t.member
		}
	}
	what := "started a Reconcile of"
	if r.Kind == kindWrite {
		what = fmt.Sprintf("sent %s (status %d) to", r.Verb, r.Code)
	}
	return fmt.Sprintf("%s (member %s) %s %s at %s, when %s owned it", r.Replica, members[r.Replica], what, r.Key,
		time.Unix(0, r.Wall).Format("15:04:05.000000"), owner)
}

// moves are what happened to the keys, from the label events.
type moves struct {
	assigned int // an unlabelled key labelled: at creation, or after an acknowledgement
	drains   int // drain labels set
	acks     int // owners' acknowledgements (the labels removed)
	handed   int // keys that went from one member to another through an acknowledgement
	direct   int // keys relabelled from one member to another with no acknowledgement: the first was dead or gone
	// handover is, for each key handed over, the time from the drain to
	// its assignment to the new member, as the server received them;
	// drainToAck and ackToAssign are its two parts, the old owner's and
	// the sharder's.
	handover, drainToAck, ackToAssign []time.Duration
	// directFrom lists, by the member that lost them, when its keys were
	// relabelled directly (received).
	directFrom map[string][]time.Time
}

func countMoves(events []labelEvent) moves {
	m := moves{directFrom: map[string][]time.Time{}}
	type state struct {
		owner, last    string // last: the owner before the acknowledgement
		draining       bool
		drainAt, ackAt time.Time
	}
	st := map[string]*state{}
	for _, e := range events {
		s := st[e.name]
		if s == nil {
			s = &state{}
			st[e.name] = s
		}
		if e.draining && !s.draining {
			m.drains++
			s.drainAt = e.received
		}
		switch {
		case e.owner == s.owner:
		case e.owner == "":
			m.acks++
			s.last, s.ackAt = s.owner, e.received
		case s.owner == "":
			m.assigned++
			if s.last != "" && s.last != e.owner {
				m.handed++
				m.handover = append(m.handover, e.received.Sub(s.drainAt))
				m.drainToAck = append(m.drainToAck, s.ackAt.Sub(s.drainAt))
				m.ackToAssign = append(m.ackToAssign, e.received.Sub(s.ackAt))
			}
			s.last = ""
		default:
			m.direct++
			m.directFrom[s.owner] = append(m.directFrom[s.owner], e.received)
		}
		s.owner, s.draining = e.owner, e.draining
	}
	return m
}

// quantile is the q-quantile of ds (nearest rank), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1))]
}
