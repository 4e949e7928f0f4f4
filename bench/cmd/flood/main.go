// Command flood measures what a flood of junk bearer tokens on a
// manager's secure metrics port (Options.SecureMetrics, guarded by
// package httpauth) does to the latency of the manager's own requests
// (security issue 36): one envtest control plane, one manager with
// SecureMetrics, a controller over ConfigMaps, and the manager's clientset
// GETting one ConfigMap at a steady pace (-rate a second, open loop,
// through the manager's rate limiter: a token bucket of 20/s and 30, the
// manager's default, wrapped to time each GET's wait in it). Each round
// runs three phases, in an order that rotates from round to round:
//
//   - quiet: no one talks to the metrics port;
//   - junk: -workers clients send GET /metrics flat out, each request
//     with a new random bearer token, over keep-alive connections;
//   - no token: the same flood without an Authorization header, which
//     the guard refuses (401) before any cache or review: the cost of
//     serving the flood's TLS and HTTP alone, as a control.
//
// A flood runs in a child process (this program re-executed with
// -child), so that its goroutines and garbage are not charged to the
// manager's runtime; it still shares the machine's CPUs. Each phase is
// measured for -phase after -settle (a flood starts at the settle's
// start). It prints, for each round and as medians over rounds, the GETs'
// p50 and p99 and their wait in the manager's rate limiter, the ratio of
// each flood's p99 to the quiet p99, the guard's answers to each flood
// (401: refused, after a review for a token; 429: throttled, no review;
// 503: the review timed out) and the TokenReviews that reached the API
// server (its apiserver_request_total{resource="tokenreviews"}, read with
// the admin config before and after each phase) against the guard's
// bound, DefaultReviewBurst + DefaultReviewsPerSecond a second.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go run ./bench/cmd/flood
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/bench/internal/machine"
	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

const ns = "flood"

// The kinds of phase, in the order of the first round.
const (
	quiet = iota
	junk
	noToken
	kinds
)

var kindNames = [kinds]string{"quiet", "junk", "no token"}

// phase is one measured phase of a round.
type phase struct {
	kind     int
	from, to time.Time       // the measured window
	lat      []time.Duration // the GETs sent in the window
	wait     []time.Duration // their waits in the manager's rate limiter
	errs     int             // GETs that failed
	codes    map[string]int  // a flood's answers by status ("error": none came)
	reviews  int             // TokenReviews at the API server, settle included
	took     time.Duration   // settle and window: what the guard's bound allows for
}

func run() error {
	rate := flag.Float64("rate", 10, "GETs a second through the manager's clientset (its rate limiter allows 20)")
	phaseLen := flag.Duration("phase", 10*time.Second, "measured length of each phase")
	settle := flag.Duration("settle", time.Second, "unmeasured time at the start of each phase")
	rounds := flag.Int("rounds", 4, "rounds of the three phases")
	workers := flag.Int("workers", 40, "flood clients")
	floodNice := flag.Int("flood-nice", 0, "run the flood's child process under nice -n N (0: as the rest), for an attacker whose CPU is not the operator's")
	child := flag.String("child", "", "internal: flood this URL for -for, print the answers as JSON, and exit")
	childFor := flag.Duration("for", 0, "internal: with -child, how long to flood")
	childToken := flag.Bool("token", true, "internal: with -child, send a random bearer token")
	flag.Parse()
	if *child != "" {
		return flood(*child, *workers, *childFor, *childToken)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make envtest` and set it to $PWD/bin/k8s")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	load0 := machine.LoadAverage()
	began := time.Now()

	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	adminCfg := rest.CopyConfig(cfg)
	adminCfg.QPS = -1
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "target"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	// A rate limiter of QPS 20, burst 30 (what the manager made by
	// default before it set none), shared by the manager's clients, timed.
	mcfg := rest.CopyConfig(cfg)
	mcfg.RateLimiter = timedLimiter{flowcontrol.NewTokenBucketRateLimiter(20, 30)}
	mgr, err := manager.New(mcfg, manager.Options{
		Name:          "flood",
		Logger:        logr.Discard(),
		Informers:     informer.Options{Namespaces: []string{ns}},
		SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		return err
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return err
	}
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	if _, err := mgr.AddController("flood", noop, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		return err
	}
	mctx, stopMgr := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- mgr.Run(mctx) }()
	defer func() {
		stopMgr()
		<-ran
	}()
	for deadline := time.Now().Add(time.Minute); mgr.SecureMetricsAddr() == nil || !mgr.Ready(); {
		if time.Now().After(deadline) {
			return errors.New("the manager was not ready within a minute")
		}
		select {
		case err := <-ran:
			return fmt.Errorf("the manager stopped: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	url := "https://" + mgr.SecureMetricsAddr().String() + "/metrics"

	// The steady GETs, each on a goroutine of its own when due (open
	// loop), recorded with the time it was sent.
	type sample struct {
		at         time.Time
		took, wait time.Duration
		err        error
	}
	var (
		mu      sync.Mutex
		samples []sample
		gets    sync.WaitGroup
	)
	getCtx, stopGets := context.WithCancel(ctx)
	defer func() {
		stopGets()
		gets.Wait()
	}()
	gets.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer tick.Stop()
		for {
			select {
			case <-getCtx.Done():
				return
			case <-tick.C:
			}
			gets.Go(func() {
				var wait time.Duration
				t0 := time.Now()
				_, err := mgr.Kubernetes().CoreV1().ConfigMaps(ns).Get(context.WithValue(ctx, waitKey{}, &wait), "target", metav1.GetOptions{})
				s := sample{at: t0, took: time.Since(t0), wait: wait, err: err}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			})
		}
	})

	phases := make([][kinds]*phase, *rounds)
	for r := range *rounds {
		for k := range kinds {
			kind := (r + k) % kinds
			p, err := measure(ctx, admin, self, url, kind, *workers, *floodNice, *settle, *phaseLen)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, kindNames[kind], err)
			}
			phases[r][kind] = p
			fmt.Fprintf(os.Stderr, "round %d %-8s %v\n", r+1, kindNames[kind], p.codes)
		}
	}
	stopGets()
	gets.Wait()
	for _, s := range samples {
		for _, round := range phases {
			for _, p := range round {
				if s.at.Before(p.from) || !s.at.Before(p.to) {
					continue
				}
				if s.err != nil {
					p.errs++
				} else {
					p.lat, p.wait = append(p.lat, s.took), append(p.wait, s.wait)
				}
			}
		}
	}
	report(phases, *rate, *phaseLen, *settle, *workers, *floodNice, load0, machine.LoadAverage(), time.Since(began))
	return nil
}

// measure runs one phase of kind: for a flood, it starts the child at
// once and waits for it to end after the window.
func measure(ctx context.Context, admin kubernetes.Interface, self, url string, kind, workers, niceness int, settle, window time.Duration) (*phase, error) {
	before, err := tokenReviews(ctx, admin)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p := &phase{kind: kind, from: start.Add(settle), to: start.Add(settle + window)}
	var cmd *exec.Cmd
	var out bytes.Buffer
	if kind != quiet {
		args := []string{self, "-child", url, "-workers", strconv.Itoa(workers), "-for", (settle + window).String(), "-token=" + strconv.FormatBool(kind == junk)}
		if niceness != 0 {
			// nice(1), so that every thread of the child starts niced.
			args = append([]string{"nice", "-n", strconv.Itoa(niceness)}, args...)
		}
		cmd = exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting the flood: %w", err)
		}
	}
	time.Sleep(time.Until(p.to)) // the window to measure, not a condition
	if cmd != nil {
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("the flood: %w", err)
		}
		if err := json.Unmarshal(out.Bytes(), &p.codes); err != nil {
			return nil, fmt.Errorf("the flood's output %q: %w", out.String(), err)
		}
	}
	p.took = time.Since(start)
	after, err := tokenReviews(ctx, admin)
	if err != nil {
		return nil, err
	}
	p.reviews = after - before
	return p, nil
}

// waitKey's value in a request's context is a *time.Duration that
// timedLimiter sets to the request's wait.
type waitKey struct{}

// timedLimiter tells the requests whose context asks how long they
// waited for a token.
type timedLimiter struct{ flowcontrol.RateLimiter }

func (l timedLimiter) Wait(ctx context.Context) error {
	t0 := time.Now()
	err := l.RateLimiter.Wait(ctx)
	if d, ok := ctx.Value(waitKey{}).(*time.Duration); ok {
		*d = time.Since(t0)
	}
	return err
}

// report prints the markdown tables.
func report(phases [][kinds]*phase, rate float64, window, settle time.Duration, workers, niceness int, load0, load1 string, took time.Duration) {
	fmt.Printf("%s, %s/%s, %d CPUs, load average %s before and %s after (1, 5, 15 min); whole run %v.\n",
		time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), load0, load1, took.Round(time.Second))
	fmt.Printf("The manager's GETs of one ConfigMap at %g/s; %d rounds of three phases in rotating order, each measured for %v after %v; floods: %d workers flat out from a child process (nice %d), keep-alive.\n\n",
		rate, len(phases), window, settle, workers, niceness)

	fmt.Println("Latency of the manager's GETs (ms), and their wait in its rate limiter (p99, ms):")
	fmt.Println()
	fmt.Println("| round | quiet p50 | quiet p99 | junk p50 | junk p99 | **junk p99 ÷ quiet p99** | no token p50 | no token p99 | no token p99 ÷ quiet p99 | limiter wait p99 quiet / junk / no token | GETs per phase (failed) |")
	fmt.Println("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	var col [7][]float64
	var pooled [kinds][]time.Duration
	for r, round := range phases {
		q, j, n := round[quiet], round[junk], round[noToken]
		v := [7]float64{pct(q.lat, .5), pct(q.lat, .99), pct(j.lat, .5), pct(j.lat, .99), 0, pct(n.lat, .5), pct(n.lat, .99)}
		for i := range v {
			col[i] = append(col[i], v[i])
		}
		col[4][r] = v[3] / v[1]
		ratioN := v[6] / v[1]
		for k := range kinds {
			pooled[k] = append(pooled[k], round[k].lat...)
		}
		fmt.Printf("| %d | %.2f | %.2f | %.2f | %.2f | **%.2f×** | %.2f | %.2f | %.2f× | %.2f / %.2f / %.2f | %d / %d / %d (%d) |\n",
			r+1, v[0], v[1], v[2], v[3], col[4][r], v[5], v[6], ratioN,
			pct(q.wait, .99), pct(j.wait, .99), pct(n.wait, .99), len(q.lat), len(j.lat), len(n.lat), q.errs+j.errs+n.errs)
	}
	var ratioN []float64
	for r := range phases {
		ratioN = append(ratioN, col[6][r]/col[1][r])
	}
	fmt.Printf("| median (min–max) | %s | %s | %s | %s | **%s** | %s | %s | %s | | |\n",
		spread(col[0], ""), spread(col[1], ""), spread(col[2], ""), spread(col[3], ""), spread(col[4], "×"), spread(col[5], ""), spread(col[6], ""), spread(ratioN, "×"))
	pq, pj, pn := pct(pooled[quiet], .99), pct(pooled[junk], .99), pct(pooled[noToken], .99)
	fmt.Printf("| all rounds pooled | %.2f | %.2f | %.2f | %.2f | %.2f× | %.2f | %.2f | %.2f× | | %d / %d / %d |\n",
		pct(pooled[quiet], .5), pq, pct(pooled[junk], .5), pj, pj/pq, pct(pooled[noToken], .5), pn, pn/pq, len(pooled[quiet]), len(pooled[junk]), len(pooled[noToken]))

	fmt.Println()
	fmt.Println("The floods as the guard answered them, and the TokenReviews that reached the API server (bound: DefaultReviewBurst + DefaultReviewsPerSecond × the phase's seconds):")
	fmt.Println()
	fmt.Println("| round | flood | requests | 401 | 429 | 503 | other | TokenReviews (bound) | TokenReviews in the quiet phase |")
	fmt.Println("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
	for r, round := range phases {
		for _, k := range []int{junk, noToken} {
			p := round[k]
			total, other := 0, 0
			for code, n := range p.codes {
				total += n
				switch code {
				case "401", "429", "503":
				default:
					other += n
				}
			}
			bound := httpauth.DefaultReviewBurst + int(math.Ceil(httpauth.DefaultReviewsPerSecond*p.took.Seconds()))
			quietReviews := ""
			if k == junk {
				quietReviews = strconv.Itoa(round[quiet].reviews)
			}
			fmt.Printf("| %d | %s | %d | %d | %d | %d | %d | %d (%d) | %s |\n",
				r+1, kindNames[k], total, p.codes["401"], p.codes["429"], p.codes["503"], other, p.reviews, bound, quietReviews)
		}
	}
}

// pct is the nearest-rank quantile q of ds, in milliseconds.
func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max(0, int(math.Ceil(q*float64(len(s))))-1)
	return float64(s[i]) / float64(time.Millisecond)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is v's median with its range, each followed by unit.
func spread(v []float64, unit string) string {
	return fmt.Sprintf("%.2f%s (%.2f–%.2f)", median(v), unit, slices.Min(v), slices.Max(v))
}

// tokenReviews is the API server's count of TokenReview requests it has
// answered: the sum of its apiserver_request_total series for resource
// "tokenreviews".
func tokenReviews(ctx context.Context, admin kubernetes.Interface) (int, error) {
	body, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	total := 0.0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="tokenreviews"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("the API server's /metrics: %q: %w", line, err)
		}
		total += v
	}
	return int(total), sc.Err()
}

// flood is the child: workers clients GET url flat out for d, each
// request with a new random bearer token if token, and it prints the
// answers by status as JSON.
func flood(url string, workers int, d time.Duration, token bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed default
		MaxIdleConnsPerHost: workers,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	codes := make([]map[string]int, workers)
	var wg sync.WaitGroup
	for w := range codes {
		codes[w] = map[string]int{}
		wg.Go(func() {
			b := make([]byte, 32)
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					codes[w]["error"]++
					continue
				}
				if token {
					_, _ = rand.Read(b)
					req.Header.Set("Authorization", "Bearer "+base64.RawURLEncoding.EncodeToString(b))
				}
				resp, err := c.Do(req)
				if err != nil {
					if ctx.Err() == nil { // not cut off by the end of the flood
						codes[w]["error"]++
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				codes[w][strconv.Itoa(resp.StatusCode)]++
			}
		})
	}
	wg.Wait()
	all := map[string]int{}
	for _, m := range codes {
		for k, n := range m {
			all[k] += n
		}
	}
	return json.NewEncoder(os.Stdout).Encode(all)
}
