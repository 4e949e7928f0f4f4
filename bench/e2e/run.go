package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	namespaces   = 10
	objPrefix    = "cm-"
	halfLabel    = "bench.ctrlkit.io/half" // on the first half of the objects
	seedWorkers  = 32
	maxInFlight  = 200 // open-loop writes outstanding at once
	settleAfter  = 5 * time.Second
	startTimeout = 3 * time.Minute
	stopTimeout  = time.Minute
)

func nsName(i int) string  { return fmt.Sprintf("bench-%d", i%namespaces) }
func objName(i int) string { return fmt.Sprintf("%s%05d", objPrefix, i) }

// seed creates the namespaces and n ConfigMaps spread over them, with
// seedWorkers in parallel; objects that exist already are kept.
func seed(ctx context.Context, c kubernetes.Interface, n int) error {
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	value := strings.Repeat("x", 256)
	next := atomic.Int64{}
	errs := make([]error, seedWorkers)
	var wg sync.WaitGroup
	for w := range seedWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				labels := map[string]string{"app": "bench"}
				if i < n/2 {
					labels[halfLabel] = "true"
				}
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: objName(i), Namespace: nsName(i), Labels: labels},
					Data:       map[string]string{"value": value},
				}
				_, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs[w] = fmt.Errorf("creating %s/%s: %w", cm.Namespace, cm.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writer is the open-loop churn writer. Sequence numbers and the object
// cursor carry on across runs, so every write sets a value never seen
// before, on the object least recently written.
type writer struct {
	client  kubernetes.Interface
	objects int
	seq     int64
	cursor  int
}

// write is one churn write: the sequence number it set, when the request
// was sent and when the API server's response arrived (zero if it failed).
type write struct {
	seq        int64
	sent, resp time.Time
}

// churn patches one object every 1/rate seconds for d, on schedule
// whatever the response times (open loop, at most maxInFlight outstanding),
// and returns every write once all have answered.
func (w *writer) churn(ctx context.Context, rate int, d time.Duration) []write {
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	out := make([]write, total)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		w.seq++
		seq, idx := w.seq, w.cursor%w.objects
		w.cursor++
		out[i].seq = seq
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, seqAnnotation, seq)
			out[i].sent = time.Now()
			_, err := w.client.CoreV1().ConfigMaps(nsName(idx)).Patch(ctx, objName(idx), types.MergePatchType, patch, metav1.PatchOptions{})
			if err == nil {
				out[i].resp = time.Now()
			}
		})
	}
	wg.Wait()
	return out
}

type runResult struct {
	sync, all     time.Duration // from start to the informer synced, to every object reconciled once
	heapPerObject float64       // bytes of heap in use after GC, over the objects, above the heap before the manager
	heapSlope     float64       // bytes per object between a cache of N/2 and of N objects
	coldCPU       float64       // process CPU seconds per 1,000 objects for the cold start
	churn         []churnResult
}

type churnResult struct {
	rate        int
	latencies   []time.Duration // sorted; write response to Reconcile start
	fromSent    []time.Duration // sorted; write request sent to Reconcile start
	missed      int             // writes that failed or no Reconcile saw in time
	cpuPer1000  float64         // process CPU seconds per 1,000 reconciles during the phase, writer baseline subtracted
	reconciles  int64
	cpuSeconds  float64
	phaseLength time.Duration
}

// quantile is the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// p is the q-quantile of the latencies from the write's response.
func (c churnResult) p(q float64) time.Duration { return quantile(c.latencies, q) }

// pSent is the q-quantile of the latencies from the write's request.
func (c churnResult) pSent(q float64) time.Duration { return quantile(c.fromSent, q) }

// started is a manager under measurement.
type started struct {
	r        *running
	cancel   context.CancelFunc
	sync     time.Duration // from start to the informer synced
	all      time.Duration // from start to want objects reconciled once
	heap     float64       // HeapInuse after GC with everything reconciled, minus before the manager
	cpu      float64       // process CPU seconds from start to want objects reconciled once
	deadline <-chan time.Time
}

// stop cancels the manager and waits for it to return.
func (s *started) stop() error {
	s.cancel()
	select {
	case err := <-s.r.done:
		return err
	case <-time.After(stopTimeout):
		return errors.New("manager did not stop within a minute")
	}
}

// startAndSync starts fw's manager (its cache limited by selector when not
// empty) and measures its cold start until want objects were reconciled
// once, then its heap. On error the manager is stopped.
func startAndSync(ctx context.Context, cfg *rest.Config, fw framework, rec *recorder, selector string) (*started, error) {
	runtime.GC()
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	baseHeap := mem.HeapInuse

	runCtx, cancel := context.WithCancel(ctx)
	cpu0, t0 := cpuSeconds(), time.Now()
	r, err := fw.start(runCtx, cfg, rec, selector)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &started{r: r, cancel: cancel}
	fail := func(err error) (*started, error) {
		_ = s.stop()
		return nil, err
	}
	// Polled every 1ms, far below what is measured.
	deadline := time.After(startTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !r.synced() {
		select {
		case <-tick.C:
		case err := <-r.done:
			cancel()
			return nil, fmt.Errorf("manager stopped before its cache synced: %w", err)
		case <-deadline:
			return fail(errors.New("cache did not sync in time"))
		}
	}
	s.sync = time.Since(t0)
	select {
	case <-rec.allDone:
		s.all = rec.allAt.Sub(t0)
		s.cpu = cpuSeconds() - cpu0
	case err := <-r.done:
		cancel()
		return nil, fmt.Errorf("manager stopped before every object was reconciled: %w", err)
	case <-deadline:
		return fail(fmt.Errorf("only %d of %d objects reconciled in time", rec.distinct(), rec.want))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&mem)
	s.heap = float64(mem.HeapInuse) - float64(baseHeap)
	return s, nil
}

// runOnce measures fw: a cold start with half the objects cached (for the
// heap slope), then a cold start with all of them followed by the churn
// phases.
// baselines[i] is the writer's CPU at c.rates[i] (writerCPU).
func runOnce(ctx context.Context, cfg *rest.Config, fw framework, c config, w *writer, baselines []float64) (runResult, error) {
	var res runResult
	half, err := startAndSync(ctx, cfg, fw, newRecorder(c.objects/2), halfLabel+"=true")
	if err != nil {
		return res, fmt.Errorf("half cache: %w", err)
	}
	if err := half.stop(); err != nil {
		return res, fmt.Errorf("stopping half cache: %w", err)
	}

	rec := newRecorder(c.objects)
	s, err := startAndSync(ctx, cfg, fw, rec, "")
	if err != nil {
		return res, err
	}
	res.sync, res.all = s.sync, s.all
	res.heapPerObject = s.heap / float64(c.objects)
	res.coldCPU = s.cpu / float64(c.objects) * 1000
	res.heapSlope = (s.heap - half.heap) / float64(c.objects-c.objects/2)

	for i, rate := range c.rates {
		ch, err := churnPhase(ctx, rec, w, rate, c.churn, baselines[i])
		if err != nil {
			_ = s.stop()
			return res, err
		}
		res.churn = append(res.churn, ch)
	}
	if err := s.stop(); err != nil {
		return res, fmt.Errorf("stopping: %w", err)
	}
	return res, nil
}

// writerCPU runs the writer at rate for d with no manager running and
// returns the process CPU seconds it took: the baseline churnPhase
// subtracts.
func writerCPU(ctx context.Context, w *writer, rate int, d time.Duration) float64 {
	cpu0 := cpuSeconds()
	w.churn(ctx, rate, d)
	return cpuSeconds() - cpu0
}

// churnPhase runs the writer at rate for d and waits up to settleAfter for
// the Reconciles that see its writes.
// baseline is the writer's own CPU seconds at this rate (writerCPU).
func churnPhase(ctx context.Context, rec *recorder, w *writer, rate int, d time.Duration, baseline float64) (churnResult, error) {
	ch := churnResult{rate: rate}
	cpu0, t0, n0 := cpuSeconds(), time.Now(), rec.reconciles.Load()
	writes := w.churn(ctx, rate, d)
	for end := time.Now().Add(settleAfter); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if rec.sawAll(writes) {
			break
		}
	}
	ch.cpuSeconds = cpuSeconds() - cpu0
	ch.phaseLength = time.Since(t0)
	ch.reconciles = rec.reconciles.Load() - n0
	if ch.reconciles > 0 {
		ch.cpuPer1000 = (ch.cpuSeconds - baseline) / float64(ch.reconciles) * 1000
	}
	for _, wr := range writes {
		start, ok := rec.startOf(wr.seq)
		if wr.resp.IsZero() || !ok {
			ch.missed++
			continue
		}
		// Negative when the watch event beat the HTTP response: kept, the
		// Reconcile really did start before the writer heard back.
		ch.latencies = append(ch.latencies, start.Sub(wr.resp))
		ch.fromSent = append(ch.fromSent, start.Sub(wr.sent))
	}
	slices.Sort(ch.latencies)
	slices.Sort(ch.fromSent)
	if len(ch.latencies) == 0 {
		return ch, fmt.Errorf("churn at %d/s: no write was seen by a Reconcile", rate)
	}
	return ch, nil
}

// cpuSeconds is the user and system CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
