package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one replica process, as the bench sees it.
type proc struct {
	name    string
	member  string // its member name in the ring; "" when not sharded
	addr    string // its HTTP endpoint
	started time.Time
	cmd     *exec.Cmd
	logPath string
	recs    *recTail
	exited  chan struct{} // closed once the process has been waited for
}

// fleet runs replica processes from one config. Its close kills every
// process still running and waits for it; PR_SET_PDEATHSIG kills them
// should the bench die first.
type fleet struct {
	cfgPath string
	dir     string
	procs   []*proc // running or not
	next    int     // names are r1, r2, ... in start order
}

// newFleet writes c to a file in c.Dir.
func newFleet(c replicaConfig) (*fleet, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.Dir, "replica.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return &fleet{cfgPath: path, dir: c.Dir}, nil
}

// launch starts one replica process, named prefix-r<i> with i counting
// the fleet's processes, so that no name is ever reused. Wait for its
// hello with awaitHello.
func (f *fleet) launch(prefix string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f.next++
	name := fmt.Sprintf("%s-r%d", prefix, f.next)
	p := &proc{name: name, logPath: filepath.Join(f.dir, name+".log"), exited: make(chan struct{}),
		recs: &recTail{path: filepath.Join(f.dir, name+".rec")}}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(self)
	p.cmd.Env = append(os.Environ(), replicaEnv+"="+name, configEnv+"="+f.cfgPath)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting replica %s: %w", name, err)
	}
	f.procs = append(f.procs, p)
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// awaitHello returns once p has said hello (its manager is built and its
// endpoint listens), and sets p.member and p.addr.
func (p *proc) awaitHello(ctx context.Context) error {
	err := waitFor(ctx, time.Minute, func() bool {
		if h, ok := p.recs.hello(); ok {
			p.member, p.addr = h[0], h[1]
			return true
		}
		return !p.alive()
	})
	if p.addr == "" {
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("replica %s did not start: %w; its log ends:\n%s", p.name, err, p.logTail(20))
	}
	if p.member == "-" {
		p.member = ""
	}
	return nil
}

// start launches count replicas at once and waits for their hellos.
func (f *fleet) start(ctx context.Context, prefix string, count int) ([]*proc, error) {
	var ps []*proc
	for range count {
		p, err := f.launch(prefix)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := p.awaitHello(ctx); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// running is the replicas not yet exited, in start order.
func (f *fleet) running() []*proc {
	var out []*proc
	for _, p := range f.procs {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to every running replica and waits for them to exit
// (a sharded replica hands its keys over and deletes its Lease first).
func (f *fleet) stop() error {
	ps := f.running()
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []string
	for _, p := range ps {
		select {
		case <-p.exited:
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				errs = append(errs, fmt.Sprintf("replica %s exited with %d; its log ends:\n%s", p.name, code, p.logTail(10)))
			}
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
			errs = append(errs, fmt.Sprintf("replica %s did not exit within a minute of SIGTERM", p.name))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// kill sends SIGKILL to p and returns when it has been waited for; at is
// the time just before the signal.
func (f *fleet) kill(p *proc) (at time.Time) {
	at = time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return at
}

// close kills every replica still running and waits for it.
func (f *fleet) close() {
	for _, p := range f.running() {
		f.kill(p)
	}
}

// checkAlive is an error naming the replicas of ps that exited.
func checkAlive(ps []*proc) error {
	for _, p := range ps {
		if !p.alive() {
			return fmt.Errorf("replica %s exited unexpectedly; its log ends:\n%s", p.name, p.logTail(20))
		}
	}
	return nil
}

// heap asks p for its heap after GC.
func (p *proc) heap(ctx context.Context) (heapStats, error) {
	var h heapStats
	b, err := p.get(ctx, "/heap")
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// heapProfile writes p's heap profile, after a GC, to dir/<name>.pb.gz.
func (p *proc) heapProfile(ctx context.Context, dir, suffix string) error {
	b, err := p.get(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, p.name+suffix+".pb.gz"), b, 0o644)
}

// metric is the value of the first sample of p's /metrics whose line
// starts with name and contains every one of labels (`key="value"`).
func (p *proc) metric(ctx context.Context, name string, labels ...string) (float64, bool, error) {
	b, err := p.get(ctx, "/metrics")
	if err != nil {
		return 0, false, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, name) || !slices.ContainsFunc([]string{"{", " "}, func(s string) bool { return strings.HasPrefix(line[len(name):], s) }) {
			continue
		}
		if !all(labels, func(l string) bool { return strings.Contains(line, l) }) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil, err
	}
	return 0, false, nil
}

func all[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

func (p *proc) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s: GET %s: %w", p.name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("replica %s: GET %s: %s", p.name, path, resp.Status)
	}
	return b, err
}

// logTail is the last n lines of p's log, for error messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitFor polls cond every 50ms until it is true, ctx ends or timeout
// passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// reconciled is one Reconcile start a replica recorded, or one event its
// informer delivered.
type reconciled struct {
	start int64 // Unix ns: when the Reconcile began, or the event was seen
	key   int32 // the ConfigMap's index
	sent  int64 // the sent annotation it read, Unix ns; 0 when none
}

// recTail reads a replica's records file incrementally: each read parses
// only what was appended since the last one. Safe for concurrent use.
type recTail struct {
	path string

	mu      sync.Mutex
	off     int64
	partial []byte
	hi      []string // hello's member and addr
	ready   int64
	recs    []reconciled // Reconciles
	events  []reconciled // events seen
}

// hello returns the member and address of the replica's hello record.
func (t *recTail) hello() ([]string, bool) {
	if err := t.read(); err != nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hi, t.hi != nil
}

// readyAt is when the replica's caches synced (Unix ns), or 0.
func (t *recTail) readyAt() (int64, error) {
	if err := t.read(); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready, nil
}

// since returns the Reconciles recorded so far that started at or after
// from (Unix ns), and the events seen since then.
func (t *recTail) since(from int64) (recs, events []reconciled, err error) {
	if err := t.read(); err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return after(t.recs, from), after(t.events, from), nil
}

// after returns the records of rs, in write order, from the first that
// started at or after from.
func after(rs []reconciled, from int64) []reconciled {
	i, _ := slices.BinarySearchFunc(rs, from, func(r reconciled, from int64) int { return cmp.Compare(r.start, from) })
	// Records are in write order, which is start order but for the
	// few microseconds between taking the time and writing: step back
	// over any equal or slightly out-of-order ones.
	for i > 0 && rs[i-1].start >= from {
		i--
	}
	return slices.Clone(rs[i:])
}

func (t *recTail) read() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil // the replica has not opened it yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(bufio.NewReader(f))
	if err != nil {
		return err
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	t.partial = slices.Clone(b[last+1:])
	for line := range bytes.SplitSeq(b[:last+1], []byte("\n")) {
		if err := t.parse(string(line)); err != nil {
			return fmt.Errorf("%s: %w", t.path, err)
		}
	}
	return nil
}

// parse takes one record line; t.mu is held.
func (t *recTail) parse(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	switch {
	case (f[0] == "r" || f[0] == "e") && len(f) == 4:
		start, err1 := strconv.ParseInt(f[1], 10, 64)
		key, err2 := keyIndex(f[2])
		sent, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("bad record %q", line)
		}
		r := reconciled{start: start, key: int32(key), sent: sent}
		if f[0] == "r" {
			t.recs = append(t.recs, r)
		} else {
			t.events = append(t.events, r)
		}
	case f[0] == "hello" && len(f) == 4:
		t.hi = f[2:4]
	case f[0] == "ready" && len(f) == 2:
		t.ready, _ = strconv.ParseInt(f[1], 10, 64)
	case f[0] == "exit":
	default:
		return fmt.Errorf("bad record %q", line)
	}
	return nil
}
