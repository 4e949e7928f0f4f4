package workqueue

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestHistogramMatchesPrometheus checks the queue's lock-guarded histogram
// against client_golang's own over controller-runtime's buckets, bucket by
// bucket, on values that sit on, just above and between the bounds.
func TestHistogramMatchesPrometheus(t *testing.T) {
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)})
	var h histogram
	values := []time.Duration{0, 1, 9, 10, 11, 99, 100, 101, 5 * time.Microsecond, time.Millisecond, time.Millisecond + 1,
		time.Second, time.Second + 1, 10 * time.Second, 10*time.Second + 1, 100 * time.Second, 100*time.Second + 1,
		1000 * time.Second, 1000*time.Second + 1, time.Hour}
	for _, d := range values {
		h.observe(d)
		ref.Observe(d.Seconds())
	}
	desc := prometheus.NewDesc("h", "h", []string{"name", "controller"}, nil)
	var got, want dto.Metric
	if err := h.metric(desc, "q").Write(&got); err != nil {
		t.Fatal(err)
	}
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	gh, wh := got.GetHistogram(), want.GetHistogram()
	if gh.GetSampleCount() != wh.GetSampleCount() {
		t.Errorf("count = %d, want %d", gh.GetSampleCount(), wh.GetSampleCount())
	}
	if d := gh.GetSampleSum() - wh.GetSampleSum(); d > 1e-9 || d < -1e-9 {
		t.Errorf("sum = %v, want %v", gh.GetSampleSum(), wh.GetSampleSum())
	}
	if len(gh.GetBucket()) != len(wh.GetBucket()) {
		t.Fatalf("%d buckets, want %d", len(gh.GetBucket()), len(wh.GetBucket()))
	}
	for i, wb := range wh.GetBucket() {
		gb := gh.GetBucket()[i]
		if gb.GetUpperBound() != wb.GetUpperBound() || gb.GetCumulativeCount() != wb.GetCumulativeCount() {
			t.Errorf("bucket %d: le=%v count=%d, want le=%v count=%d", i,
				gb.GetUpperBound(), gb.GetCumulativeCount(), wb.GetUpperBound(), wb.GetCumulativeCount())
		}
	}
}

// TestMetricsScrapeRace scrapes while producers and workers use the queue
// (run with -race), then checks that the counters add up once it is quiet.
func TestMetricsScrapeRace(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(Options[string]{Name: "race", Metrics: m, RateLimiter: &fakeLimiter{delay: time.Microsecond, n: map[string]int{}}})
	if err != nil {
		t.Fatal(err)
	}
	const producers, perProducer = 4, 2000
	var done sync.WaitGroup
	var processed sync.Map
	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				processed.Store(k, true)
				q.Done(k)
			}
		})
	}
	stopScrape := make(chan struct{})
	var scraper sync.WaitGroup
	scraper.Go(func() {
		for {
			select {
			case <-stopScrape:
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Errorf("Gather: %v", err)
				return
			}
		}
	})
	for p := range producers {
		done.Go(func() {
			for i := range perProducer {
				q.Add(string(rune('a'+p)) + string(rune(i%64+'0')))
			}
		})
	}
	done.Wait()
	q.ShutDownWithDrain()
	workers.Wait()
	close(stopScrape)
	scraper.Wait()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]*dto.Metric{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			values[mf.GetName()] = s
		}
	}
	adds := values["workqueue_adds_total"].GetCounter().GetValue()
	gets := values["workqueue_queue_duration_seconds"].GetHistogram().GetSampleCount()
	dones := values["workqueue_work_duration_seconds"].GetHistogram().GetSampleCount()
	if adds == 0 || uint64(adds) != gets || gets != dones {
		t.Errorf("adds_total %v, queue_duration count %d, work_duration count %d: want all equal and > 0", adds, gets, dones)
	}
	if d := values["workqueue_depth"].GetGauge().GetValue(); d != 0 {
		t.Errorf("depth after drain = %v, want 0", d)
	}
	if u := values["workqueue_unfinished_work_seconds"].GetGauge().GetValue(); u != 0 {
		t.Errorf("unfinished work after drain = %v, want 0", u)
	}
}

// TestMetricsContinueAcrossQueuesOfOneName: a queue that replaces one of the
// same name (a restarted controller) continues its counters instead of
// resetting them.
func TestMetricsContinueAcrossQueuesOfOneName(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cycle := func(keys ...string) {
		q, err := New(Options[string]{Name: "ctl", Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			q.Add(k)
			k, _ := q.Get()
			q.Done(k)
		}
		q.ShutDown()
	}
	cycle("a", "b")
	cycle("c")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "workqueue_adds_total":
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got != 3 {
				t.Errorf("adds_total = %v, want 3 (2 from the first queue, 1 from its replacement)", got)
			}
		case "workqueue_work_duration_seconds":
			if got := mf.GetMetric()[0].GetHistogram().GetSampleCount(); got != 3 {
				t.Errorf("work_duration count = %v, want 3", got)
			}
		}
	}
}
