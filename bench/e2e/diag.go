package main

// Diagnostics for the cold start, opt-in by environment variable, off by
// default (they perturb what they measure):
//
//	BENCH_TRACE=1        log every HTTP request of the managers under test:
//	                     method, URL, Content-Type and Accept sent, the
//	                     Content-Type answered, time to the response headers
//	                     and to the body's close, bytes read, to stderr.
//	BENCH_CPUPROFILE=dir write a CPU profile of the process from building
//	                     each full (not half) manager to its informer
//	                     synced, dir/<framework>-<N>-<seq>.pprof.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

var traceHTTP = os.Getenv("BENCH_TRACE") != ""

// BENCH_PHASES=1: print, per cold start, when the informer's store got its
// first object (the end of the watch-list stream: client-go fills a
// temporary store until the initial-events-end bookmark, then replaces)
// and when it synced.
var tracePhases = os.Getenv("BENCH_PHASES") != ""

// phaseLen is the store length of the last started manager's informer.
var phaseLen func() int

var traceEpoch atomic.Pointer[time.Time]

// traced wraps cfg's transport with the request log when BENCH_TRACE is set.
func traced(cfg *rest.Config, who string) *rest.Config {
	if !traceHTTP {
		return cfg
	}
	now := time.Now()
	traceEpoch.Store(&now)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			t0 := time.Now()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				fmt.Fprintf(os.Stderr, "trace %s +%v %s %s err %v\n", who, t0.Sub(*traceEpoch.Load()).Round(time.Millisecond), req.Method, req.URL, err)
				return resp, err
			}
			hdr := time.Since(t0)
			resp.Body = &countingBody{ReadCloser: resp.Body, done: func(n int64) {
				fmt.Fprintf(os.Stderr, "trace %s +%v %s %s ct=%q accept=%q -> %d %q headers %v body %v %d B\n",
					who, t0.Sub(*traceEpoch.Load()).Round(time.Millisecond), req.Method, req.URL,
					req.Header.Get("Content-Type"), req.Header.Get("Accept"), resp.StatusCode, resp.Header.Get("Content-Type"),
					hdr.Round(time.Microsecond), time.Since(t0).Round(time.Microsecond), n)
			}}
			return resp, nil
		})
	})
	return cfg
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n    int64
	done func(int64)
	once atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *countingBody) Close() error {
	if b.once.CompareAndSwap(false, true) {
		b.done(b.n)
	}
	return b.ReadCloser.Close()
}

var profileSeq atomic.Int64

// startProfile starts a CPU profile when BENCH_CPUPROFILE is set, and
// returns the function that stops it.
func startProfile(name string) func() {
	dir := os.Getenv("BENCH_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	_ = os.MkdirAll(dir, 0o755)
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, profileSeq.Add(1))))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeHeapProfile writes the heap profile (in use after the last GC) when
// BENCH_HEAPPROFILE is set, dir/<name>-<seq>.heap.
func writeHeapProfile(name string) {
	dir := os.Getenv("BENCH_HEAPPROFILE")
	if dir == "" {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.heap", name, profileSeq.Add(1))))
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

func init() {
	if os.Getenv("BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1024 // fine enough to attribute a ConfigMap's ~1.6 KB
	}
}
