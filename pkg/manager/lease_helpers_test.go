package manager_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Default lease timings: the fence closes 12s after the last renewal, a
// standby may take over 15s after it, and the abort timeout is the 3s
// between the two.
const (
	leaseDuration = leader.DefaultLeaseDuration
	abortTimeout  = 3 * time.Second
)

var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// leaseAPI is the Lease on a fake API server, which another replica (the
// thief) can hold: while it does, writes naming anyone else conflict.
type leaseAPI struct {
	kube *cluster

	mu    sync.Mutex
	thief string
}

func newLeaseAPI(kube *cluster) *leaseAPI {
	a := &leaseAPI{kube: kube}
	kube.React(func(req *http.Request) (*http.Response, error) {
		if (req.Method != http.MethodPut && req.Method != http.MethodPost) || !strings.Contains(req.URL.Path, "/leases") {
			return nil, nil
		}
		a.mu.Lock()
		thief := a.thief
		a.mu.Unlock()
		if thief == "" {
			return nil, nil
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		obj, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding a Lease write: %w", err)
		}
		l := obj.(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != thief {
			return statusResponse(apierrors.NewConflict(leases, l.Name, errors.New("the object has been modified"))), nil
		}
		return nil, nil
	})
	return a
}

// steal makes thief hold the Lease ns/op, renewed now, and keep it.
func (a *leaseAPI) steal(t *testing.T, thief string) {
	t.Helper()
	a.mu.Lock()
	a.thief = thief
	a.mu.Unlock()
	a.write(t, thief)
}

// free makes the thief release the Lease.
func (a *leaseAPI) free(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	a.thief = ""
	a.mu.Unlock()
	a.write(t, "")
}

func (a *leaseAPI) write(t *testing.T, holder string) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	secs := int32(leaseDuration / time.Second)
	l, err := a.kube.CoordinationV1().Leases("ns").Get(context.Background(), "op", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op"}}
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, AcquireTime: &now, LeaseDurationSeconds: &secs}
		_, err = a.kube.CoordinationV1().Leases("ns").Create(context.Background(), l, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &holder, &now, &now
		_, err = a.kube.CoordinationV1().Leases("ns").Update(context.Background(), l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("writing the Lease as %q: %v", holder, err)
	}
}

// holder is who the Lease names.
func (a *leaseAPI) holder(t *testing.T) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := a.kube.Get(types.NamespacedName{Namespace: "ns", Name: "op"}, &l); err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	if h := l.Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}

// electedOptions are the Options of replica "a" of Lease ns/op, with
// default timings and a registry of their own.
func electedOptions(mutate ...func(*leader.Options)) (manager.Options, *prometheus.Registry) {
	le := &leader.Options{Name: "op", Namespace: "ns", Identity: "a"}
	for _, f := range mutate {
		f(le)
	}
	reg := prometheus.NewRegistry()
	return manager.Options{LeaderElection: le, Registry: reg, ShutdownTimeout: 5 * time.Second}, reg
}

// configMaps declares the ConfigMap informer on m.
func configMaps(t *testing.T, m *manager.Manager) *informer.Informer[*corev1.ConfigMap] {
	t.Helper()
	cms, err := informer.For[*corev1.ConfigMap](m.Cache(), m.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	return cms
}

// calls records Reconcile calls: how many per key, and the ctx of each.
type calls struct {
	mu   sync.Mutex
	n    map[string]int
	ctxs map[string]context.Context // the latest
}

func (c *calls) record(ctx context.Context, req reconcile.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.ctxs = map[string]int{}, map[string]context.Context{}
	}
	c.n[req.String()]++
	c.ctxs[req.String()] = ctx
}

func (c *calls) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *calls) keys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

func (c *calls) ctx(key string) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctxs[key]
}

// sum adds up the values of family's series whose labels include labels:
// gauges and counters by value, histograms by sample count (and sum,
// the second result).
func sum(t *testing.T, g prometheus.Gatherer, family string, labels map[string]string) (float64, float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var n, s float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				n += m.Gauge.GetValue()
			case m.Counter != nil:
				n += m.Counter.GetValue()
			case m.Histogram != nil:
				n += float64(m.Histogram.GetSampleCount())
				s += m.Histogram.GetSampleSum()
			}
		}
	}
	return n, s
}
