package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

const (
	startTimeout = 5 * time.Minute // to sync and reconcile every object once
	stopTimeout  = time.Minute
	pollEvery    = time.Millisecond // far below what is measured
)

// coldResult is one cold start.
type coldResult struct {
	sync, all time.Duration // from building the manager to its informer synced, to every object reconciled once
	cpuPer1k  float64       // process CPU seconds per 1,000 objects from building the manager to every object reconciled
	heap      float64       // bytes of heap in use after GC, every object reconciled, above the heap before the manager
}

// heapPair is the heap of two cold starts over the same objects, one whose
// cache holds half of them (label selector) and one that holds all.
type heapPair struct{ half, full float64 }

// slope is the heap per object between the two, n being all the objects.
func (h heapPair) slope(n int) float64 { return (h.full - h.half) / float64(n-n/2) }

// started is a manager under measurement.
type started struct {
	r        *running
	rec      *recorder
	cancel   context.CancelFunc
	t0       time.Time
	cpu0     float64
	baseHeap float64
	deadline time.Time
	res      coldResult
}

// launch starts fw's manager for s, after noting the heap in use (after
// GC) and the process CPU time.
func launch(ctx context.Context, cfg *rest.Config, fw framework, rec *recorder, s setup) (*started, error) {
	st := &started{rec: rec, baseHeap: heapInUse()}
	runCtx, cancel := context.WithCancel(ctx)
	st.cancel = cancel
	st.cpu0, st.t0 = cpuSeconds(), time.Now()
	st.deadline = st.t0.Add(startTimeout)
	r, err := fw.start(runCtx, cfg, rec, s)
	if err != nil {
		cancel()
		return nil, err
	}
	st.r = r
	return st, nil
}

// waitSynced polls the informer's HasSynced until it reports true.
func (st *started) waitSynced() error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var firstStored time.Duration
	for !st.r.synced() {
		if tracePhases && firstStored == 0 && phaseLen != nil && phaseLen() > 0 {
			firstStored = time.Since(st.t0)
		}
		select {
		case <-tick.C:
		case err := <-st.r.done:
			return fmt.Errorf("manager stopped before its cache synced: %w", err)
		case <-time.After(time.Until(st.deadline)):
			return errors.New("cache did not sync in time")
		}
	}
	st.res.sync = time.Since(st.t0)
	phaseLen = nil // it holds the informer: it would count in the next run's heap baseline
	if tracePhases {
		fmt.Fprintf(os.Stderr, "phases: first object stored %v, synced %v (stream %.0f%%)\n", firstStored.Round(time.Millisecond), st.res.sync.Round(time.Millisecond), 100*float64(firstStored)/float64(st.res.sync))
	}
	return nil
}

// waitAll waits until every object was reconciled once.
func (st *started) waitAll() error {
	select {
	case <-st.rec.allDone:
		st.res.all = st.rec.allAt.Sub(st.t0)
		st.res.cpuPer1k = (cpuSeconds() - st.cpu0) / float64(st.rec.want) * 1000
		return nil
	case err := <-st.r.done:
		return fmt.Errorf("manager stopped before every object was reconciled: %w", err)
	case <-time.After(time.Until(st.deadline)):
		return fmt.Errorf("only %d of %d objects reconciled in time", st.rec.distinct(), st.rec.want)
	}
}

// stop cancels the manager and waits for it to return.
func (st *started) stop() error {
	st.cancel()
	select {
	case err := <-st.r.done:
		return err
	case <-time.After(stopTimeout):
		return errors.New("manager did not stop within a minute")
	}
}

// heapSettle is how long a manager idles after its last initial Reconcile
// before its heap is measured: longer than the second after which ctrlkit's
// queue gives back what a drained backlog held.
const heapSettle = 2 * time.Second

// coldStart starts fw's manager for s and measures its cold start until
// every object (want, named prefix...) was reconciled once, then its heap.
// The manager keeps running; on error it is stopped.
func coldStart(ctx context.Context, cfg *rest.Config, fw framework, s setup, want int, prefix string) (*started, error) {
	stopProfile := func() {}
	if s.selector == "" {
		stopProfile = startProfile(fmt.Sprintf("%s-%d", fw.name, want))
	}
	st, err := launch(ctx, cfg, fw, newRecorder(want, prefix), s)
	if err != nil {
		stopProfile()
		return nil, err
	}
	err = st.waitSynced()
	stopProfile()
	if err != nil {
		_ = st.stop()
		return nil, err
	}
	if err := st.waitAll(); err != nil {
		_ = st.stop()
		return nil, err
	}
	// The steady state after the initial list, not its last instant: a
	// settled manager, idle, for heapSettle. The time passing is the point.
	time.Sleep(heapSettle)
	st.res.heap = heapInUse() - st.baseHeap
	if s.selector == "" {
		writeHeapProfile(fmt.Sprintf("%s-%d", fw.name, want))
	}
	return st, nil
}

// coldOnly is a cold start that stops the manager once measured.
func coldOnly(ctx context.Context, cfg *rest.Config, fw framework, s setup, want int, prefix string) (coldResult, error) {
	st, err := coldStart(ctx, cfg, fw, s, want, prefix)
	if err != nil {
		return coldResult{}, err
	}
	return st.res, st.stop()
}

// heapRuns measures the heap of a half cache and a full cache of the
// objects (n of them, named prefix..., the first n/2 labelled halfLabel).
func heapRuns(ctx context.Context, cfg *rest.Config, fw framework, s setup, n int, prefix string) (heapPair, error) {
	half := s
	half.selector = halfLabel + "=true"
	h, err := coldOnly(ctx, cfg, fw, half, n/2, prefix)
	if err != nil {
		return heapPair{}, fmt.Errorf("half cache: %w", err)
	}
	f, err := coldOnly(ctx, cfg, fw, s, n, prefix)
	if err != nil {
		return heapPair{}, fmt.Errorf("full cache: %w", err)
	}
	return heapPair{half: h.heap, full: f.heap}, nil
}

// roundResult is what one framework measured in one round of the main
// phase, over the first size of ConfigMaps; what -only left out is zero.
type roundResult struct {
	cold    coldResult // the full manager's cold start, for cold and churn
	hasCold bool
	cmHeap  heapPair // defaults (cold)
	cmLean  heapPair // best memory option; zero when the defaults are it (cold)
	churn   []churnResult
	storms  []stormResult // one per c.storm.costs
}

// mainRound measures fw on c.sizes[0] ConfigMaps, the sections c selects:
// half and full cold starts (heap, timings, CPU), churn at every rate on
// the full manager, the storm on a fresh one for every Reconcile cost, and
// the heap with its best memory option. baselines[i] is the writer's CPU
// at c.rates[i] (writerCPU), for churn.
func mainRound(ctx context.Context, cfg *rest.Config, fw framework, c config, w *writer, baselines []float64) (roundResult, error) {
	var res roundResult
	n := c.sizes[0]
	var half coldResult
	var err error
	if c.runs(secCold) {
		if half, err = coldOnly(ctx, cfg, fw, setup{kind: configMaps, selector: halfLabel + "=true"}, n/2, objPrefix); err != nil {
			return res, fmt.Errorf("half cache: %w", err)
		}
	}
	if c.runs(secCold) || c.runs(secChurn) {
		st, err := coldStart(ctx, cfg, fw, setup{kind: configMaps}, n, objPrefix)
		if err != nil {
			return res, err
		}
		res.cold, res.hasCold = st.res, true
		if c.runs(secCold) {
			res.cmHeap = heapPair{half: half.heap, full: st.res.heap}
		}
		if c.runs(secChurn) {
			for i, rate := range c.rates {
				ch, err := churnPhase(ctx, st.rec, w, rate, c.churn, baselines[i])
				if err != nil {
					_ = st.stop()
					return res, err
				}
				res.churn = append(res.churn, ch)
			}
		}
		if err := st.stop(); err != nil {
			return res, fmt.Errorf("stopping: %w", err)
		}
	}
	if c.runs(secStorm) {
		for _, cost := range c.storm.costs {
			st, err := stormPhase(ctx, cfg, fw, c, cost, w)
			if err != nil {
				return res, fmt.Errorf("storm, %v per Reconcile: %w", cost, err)
			}
			res.storms = append(res.storms, st)
		}
	}
	if c.runs(secCold) && fw.lean != "" {
		if res.cmLean, err = heapRuns(ctx, cfg, fw, setup{kind: configMaps, lean: true}, n, objPrefix); err != nil {
			return res, fmt.Errorf("lean: %w", err)
		}
	}
	return res, nil
}

// podRound is what one framework measured in one round of the Pod phase.
type podRound struct {
	heap, lean heapPair // defaults; best memory option (zero when the defaults are it)
}

// podsRound measures the heap of fw's caches of n Pods, with its defaults
// and with its best memory option.
func podsRound(ctx context.Context, cfg *rest.Config, fw framework, n int) (podRound, error) {
	var res podRound
	var err error
	if res.heap, err = heapRuns(ctx, cfg, fw, setup{kind: pods}, n, podPrefix); err != nil {
		return res, err
	}
	if fw.lean != "" {
		if res.lean, err = heapRuns(ctx, cfg, fw, setup{kind: pods, lean: true}, n, podPrefix); err != nil {
			return res, fmt.Errorf("lean: %w", err)
		}
	}
	return res, nil
}

// heapInUse is HeapInuse after two GCs, in bytes.
func heapInUse() float64 {
	runtime.GC()
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	return float64(mem.HeapInuse)
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
