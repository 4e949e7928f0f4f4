// Package pprof serves Go's profiles, what `go tool pprof` and `go tool
// trace` fetch, with handlers of its own rather than net/http/pprof's:
// importing that package adds its handlers to http.DefaultServeMux for
// the whole program, so any server of http.DefaultServeMux in it would
// serve profiles to anyone. The manager's secure metrics server serves
// these behind its authentication (SecureMetricsOptions.Pprof).
package pprof

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"
)

// Handle adds the profile handlers under /debug/pprof/ to mux.
func Handle(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/{$}", pprofIndex)
	mux.HandleFunc("GET /debug/pprof/{name}", pprofNamed)
	mux.HandleFunc("GET /debug/pprof/profile", pprofCPU)
	mux.HandleFunc("GET /debug/pprof/trace", pprofTrace)
}

// pprofIndex lists the profiles.
func pprofIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "Profiles (?debug=1 for text):")
	for _, p := range pprof.Profiles() {
		fmt.Fprintf(w, "  /debug/pprof/%s\t%d\n", p.Name(), p.Count())
	}
	fmt.Fprintln(w, "  /debug/pprof/profile\tCPU profile, ?seconds=30")
	fmt.Fprintln(w, "  /debug/pprof/trace\texecution trace, ?seconds=1")
}

// pprofNamed serves a runtime/pprof profile: binary, or text with
// ?debug=N; ?gc=1 runs a garbage collection before a heap profile.
func pprofNamed(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, fmt.Sprintf("no profile %q: /debug/pprof/ lists them", name), http.StatusNotFound)
		return
	}
	debug, err := intParam(r, "debug", 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if gc, _ := intParam(r, "gc", 0); gc > 0 && name == "heap" {
		runtime.GC()
	}
	setProfileHeaders(w, name, debug == 0)
	_ = p.WriteTo(w, debug) // a failed write is the client gone
}

// pprofCPU records a CPU profile for ?seconds (30 by default), or until
// the client goes.
func pprofCPU(w http.ResponseWriter, r *http.Request) {
	record(w, r, "profile", 30*time.Second, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// pprofTrace records an execution trace for ?seconds (1 by default), or
// until the client goes.
func pprofTrace(w http.ResponseWriter, r *http.Request) {
	record(w, r, "trace", time.Second, trace.Start, trace.Stop)
}

// record serves the recording name, made by start and stop, for ?seconds
// (def by default) or until the client goes.
func record(w http.ResponseWriter, r *http.Request, name string, def time.Duration, start func(io.Writer) error, stop func()) {
	d, err := durationParam(r, def)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	setProfileHeaders(w, name, true)
	if err := start(w); err != nil {
		w.Header().Del("Content-Disposition")
		http.Error(w, "cannot start the "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	wait(r, d)
	stop()
}

func setProfileHeaders(w http.ResponseWriter, name string, binary bool) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !binary {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
}

// wait returns after d, or when r's client goes.
func wait(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func intParam(r *http.Request, name string, def int) (int, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("?%s=%q is not a whole number", name, s)
	}
	return n, nil
}

// durationParam reads ?seconds, which must be positive.
func durationParam(r *http.Request, def time.Duration) (time.Duration, error) {
	s := r.FormValue("seconds")
	if s == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 3600 {
		return 0, fmt.Errorf("?seconds=%q is not a number of seconds between 0 and 3600", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}
