//go:build linux

package ha

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one replica process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	records *tail
	exited  chan struct{} // closed once the process has been waited for

	mu       sync.Mutex
	exitErr  error     // once exited is closed
	exitAt   time.Time // when the wait returned
	killedAt time.Time // when the test sent SIGKILL, if it did
	pauses   []span    // when the test had it stopped (SIGSTOP → SIGCONT), Unix ns
}

// span is [from, to] in Unix ns.
type span struct{ from, to int64 }

// fleet is the replicas of one scenario. Its cleanup kills every process
// (SIGKILL works on a stopped one too) and waits for it; PR_SET_PDEATHSIG
// kills them should the test process die first.
type fleet struct {
	t       *testing.T
	dir     string
	self    string // the test binary, run again as each replica
	cfgPath string // the replicas' replicaConfig
	procs   []*proc
}

// startFleet writes c to a file in c.Dir and starts one replica process
// per name.
func startFleet(t *testing.T, c replicaConfig, names ...string) *fleet {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(c.Dir, "replica.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, dir: c.Dir, self: self, cfgPath: cfgPath}
	t.Cleanup(f.killAll)
	f.add(names...)
	return f
}

// add starts one more replica process per name, with the fleet's config.
func (f *fleet) add(names ...string) {
	f.t.Helper()
	for _, name := range names {
		p := &proc{name: name, logPath: filepath.Join(f.dir, name+".log"), exited: make(chan struct{}),
			records: &tail{path: filepath.Join(f.dir, name+".jsonl")}}
		logFile, err := os.Create(p.logPath)
		if err != nil {
			f.t.Fatal(err)
		}
		p.cmd = exec.Command(f.self)
		p.cmd.Env = append(os.Environ(), replicaEnv+"="+name, configEnv+"="+f.cfgPath)
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			logFile.Close()
			f.t.Fatalf("starting replica %s: %v", name, err)
		}
		f.procs = append(f.procs, p)
		go func() {
			err := p.cmd.Wait()
			logFile.Close()
			p.mu.Lock()
			p.exitErr, p.exitAt = err, time.Now()
			p.mu.Unlock()
			close(p.exited)
		}()
	}
}

func (f *fleet) proc(name string) *proc {
	for _, p := range f.procs {
		if p.name == name {
			return p
		}
	}
	f.t.Fatalf("no replica named %q", name)
	return nil
}

// killAll kills every replica still running, waits for it, and fails the
// test if a replica's log shows a data race.
func (f *fleet) killAll() {
	for _, p := range f.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, p := range f.procs {
		select {
		case <-p.exited:
		case <-time.After(waitTimeout):
			f.t.Errorf("replica %s (pid %d) did not die within %v of SIGKILL", p.name, p.cmd.Process.Pid, waitTimeout)
		}
		if b, err := os.ReadFile(p.logPath); err == nil && bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			f.t.Errorf("replica %s reported a data race:\n%s", p.name, excerpt(b, "WARNING: DATA RACE", 60))
		}
	}
}

// kill sends SIGKILL to p and returns when it has been waited for; at is
// the time just before the signal.
func (f *fleet) kill(p *proc) (at time.Time) {
	f.t.Helper()
	at = time.Now()
	p.mu.Lock()
	p.killedAt = at
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		f.t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(waitTimeout):
		f.t.Fatalf("replica %s did not die within %v of SIGKILL", p.name, waitTimeout)
	}
	return at
}

// terminate sends SIGTERM to each of ps, a graceful shutdown, and returns
// when they have all been waited for; at is the time just before the
// first signal.
func (f *fleet) terminate(ps ...*proc) (at time.Time) {
	f.t.Helper()
	at = time.Now()
	for _, p := range ps {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			f.t.Fatalf("SIGTERM %s: %v", p.name, err)
		}
	}
	for _, p := range ps {
		select {
		case <-p.exited:
		case <-time.After(waitTimeout):
			f.t.Fatalf("replica %s did not exit within %v of SIGTERM", p.name, waitTimeout)
		}
	}
	return at
}

// stop sends SIGSTOP to p and waits until the kernel shows it stopped. at
// is the time just before the signal; the recorded pause starts when the
// stop was seen, so it never covers time p could still run.
func (f *fleet) stop(p *proc) (at time.Time) {
	f.t.Helper()
	at = time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		f.t.Fatalf("SIGSTOP %s: %v", p.name, err)
	}
	eventually(f.t, waitTimeout, func() bool { return procState(p.cmd.Process.Pid) == 'T' }, "replica %s to be stopped", p.name)
	p.mu.Lock()
	p.pauses = append(p.pauses, span{from: time.Now().UnixNano()})
	p.mu.Unlock()
	return at
}

// cont sends SIGCONT to p; at, the end of the recorded pause, is the time
// just before the signal.
func (f *fleet) cont(p *proc) (at time.Time) {
	f.t.Helper()
	at = time.Now()
	p.mu.Lock()
	p.pauses[len(p.pauses)-1].to = at.UnixNano()
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		f.t.Fatalf("SIGCONT %s: %v", p.name, err)
	}
	return at
}

// procState is the state letter of pid in /proc/pid/stat ('T' when
// stopped), or 0.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) S ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// exit reports whether p has exited, and when and how.
func (p *proc) exit() (exited bool, at time.Time, err error) {
	select {
	case <-p.exited:
	default:
		return false, time.Time{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return true, p.exitAt, p.exitErr
}

// facts are what the test did to p, for the analysis.
func (p *proc) facts() (killedAt time.Time, pauses []span) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killedAt, slices.Clone(p.pauses)
}

// logTail is the last n lines of p's log, for failure messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// excerpt is up to n lines of b from the first line containing marker.
func excerpt(b []byte, marker string, n int) string {
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		return ""
	}
	lines := strings.SplitN(string(b[i:]), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// records is every record p has written so far.
func (p *proc) recs() []record {
	recs, err := p.records.read()
	if err != nil {
		panic(fmt.Sprintf("reading %s: %v", p.records.path, err))
	}
	return recs
}

// allRecords is every record of every replica so far.
func (f *fleet) allRecords() []record {
	var out []record
	for _, p := range f.procs {
		out = append(out, p.recs()...)
	}
	return out
}

// tail reads a records file incrementally: each read parses only what was
// appended since the last one, and keeps a partial last line for later.
// Safe for concurrent use.
type tail struct {
	path string

	mu      sync.Mutex
	off     int64
	partial []byte
	recs    []record
}

func (t *tail) read() ([]record, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil, nil // the replica has not opened it yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(bufio.NewReader(f))
	if err != nil {
		return nil, err
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	t.partial = slices.Clone(b[last+1:])
	for line := range bytes.SplitSeq(b[:last+1], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: %w: %q", t.path, err, line)
		}
		t.recs = append(t.recs, r)
	}
	return t.recs[:len(t.recs):len(t.recs)], nil
}
