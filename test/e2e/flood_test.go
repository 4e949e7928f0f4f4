package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/test/internal/leaks"
)

// TestSecureMetricsFlood (security issue 36): a flood of junk bearer
// tokens on the secure metrics port while a controller works. The manager
// is given a rest.Config whose RateLimiter counts the tokens it hands out
// and to whom: client-go waits on it with each request's context, so a
// wait whose context came from a request the metrics server serves is a
// review the guard sent through the manager's request budget. The test
// asserts, with counts and no timing bound:
//   - the guard took no token from the manager's limiter, while it did
//     send TokenReviews, and the controller's writes took theirs from it;
//   - the controller reconciled every object created during the flood;
//   - the TokenReviews that reached the API server (its own
//     apiserver_request_total, read before and after) are at most
//     DefaultReviewBurst + DefaultReviewsPerSecond a second of flood, and
//     at least one per 401 (every junk token is new); the rest got 429.
//
// That 20 concurrent requests with one new token make one TokenReview is
// pkg/httpauth's TestSingleFlight, which can hold the review open until
// all 20 wait; against a real API server the requests could not be made
// to overlap, so it is not repeated here.
func TestSecureMetricsFlood(t *testing.T) {
	const (
		objects  = 40                    // ConfigMaps created during the flood
		workers  = 40                    // flood clients
		requests = 1000                  // junk requests, all told
		pace     = 10 * time.Millisecond // one request due every pace: 1,000 over 10s
	)
	ns := newNamespace(t)
	ctx := t.Context()
	// Goroutines alive now (envtest's, the admin client's connection) are
	// not the test's; registered first, this check runs after every other
	// cleanup but the namespace's, the manager's stop included.
	baseline := goleak.IgnoreCurrent()
	floodTransport := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed default
		MaxIdleConnsPerHost: workers,
	}
	t.Cleanup(func() { leaks.None(t, floodTransport.CloseIdleConnections, baseline, stopTimeout) })

	limiter := &countingLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(20, 30)}
	mcfg := rest.CopyConfig(cfg)
	mcfg.RateLimiter = limiter
	mgr := newManager(t, mcfg, ns, manager.Options{
		SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0"},
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	const mark = "e2e.ctrlkit.io/reconciled"
	patch := []byte(`{"metadata":{"annotations":{"` + mark + `":"yes"}}}`)
	reconciler := func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cm, err := cms.Lister().Get(req.Namespace, req.Name)
		if err != nil || cm.Annotations[mark] != "" {
			return reconcile.Result{}, nil
		}
		ctx = context.WithValue(ctx, reconcileKey{}, true)
		_, err = mgr.Kubernetes().CoreV1().ConfigMaps(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return reconcile.Result{}, err
	}
	if _, err := mgr.AddController("flood", reconcile.Func(reconciler), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, func() bool { return mgr.SecureMetricsAddr() != nil && mgr.Ready() }, "the manager to serve and be ready")
	url := "https://" + mgr.SecureMetricsAddr().String() + "/metrics"
	reviewsBefore := tokenReviewsAtServer(t)

	// The flood: requests paced one every pace, each sent by the first
	// of the workers free, each with a token never sent before.
	c := &http.Client{Transport: floodTransport, Timeout: waitTimeout}
	var (
		mu    sync.Mutex
		codes = map[int]int{} // 0: no response
		wg    sync.WaitGroup
		due   = make(chan struct{})
	)
	began := time.Now()
	wg.Go(func() {
		defer close(due)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for range requests {
			<-tick.C
			due <- struct{}{}
		}
	})
	for range workers {
		wg.Go(func() {
			for range due {
				code := junkRequest(ctx, c, url)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	// Meanwhile, objects for the controller, one every 250ms.
	tick := time.NewTicker(250 * time.Millisecond)
	for i := range objects {
		<-tick.C
		createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i), map[string]string{"k": "v"}, nil)
	}
	tick.Stop()
	wg.Wait()
	flood := time.Since(began)

	eventually(t, waitTimeout, func() bool {
		list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for _, cm := range list.Items {
			if cm.Annotations[mark] != "" {
				n++
			}
		}
		return n == objects
	}, "the controller to reconcile all %d ConfigMaps", objects)

	// The API server counts a request once it has answered it, which may
	// be just after the guard has its answer; every 401 had a review.
	var reviews int
	eventually(t, waitTimeout, func() bool {
		reviews = tokenReviewsAtServer(t) - reviewsBefore
		return reviews >= codes[http.StatusUnauthorized]
	}, "the API server to count a TokenReview for each of the %d requests refused 401", codes[http.StatusUnauthorized])
	bound := httpauth.DefaultReviewBurst + int(math.Ceil(httpauth.DefaultReviewsPerSecond*flood.Seconds()))
	served, reconciles, other := limiter.counts()
	t.Logf("%d junk requests in %v: statuses %v; %d TokenReviews reached the API server (bound %d); the manager's limiter gave %d tokens to requests served on the metrics port, %d to the controller's writes, %d to the rest",
		requests, flood.Round(time.Millisecond), codes, reviews, bound, served, reconciles, other)

	for code, n := range codes {
		switch code {
		case http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Errorf("%d junk requests answered %d, want only 401, 429 or 503", n, code)
		}
	}
	if codes[http.StatusUnauthorized] == 0 || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("statuses %v: want some 401 (tokens reviewed) and some 429 (reviews refused)", codes)
	}
	if reviews > bound {
		t.Errorf("%d TokenReviews reached the API server during %v of flood, want at most DefaultReviewBurst + DefaultReviewsPerSecond x %.1fs = %d",
			reviews, flood.Round(time.Millisecond), flood.Seconds(), bound)
	}
	if served != 0 {
		t.Errorf("the guard's reviews took %d tokens from the manager's rate limiter, want 0: it must review through a limiter of its own", served)
	}
	if reconciles < objects {
		t.Errorf("the controller's writes took %d tokens from the manager's rate limiter, want at least %d (one per object): is the counting limiter the manager's?", reconciles, objects)
	}
}

// reconcileKey marks the context of the test controller's writes.
type reconcileKey struct{}

// countingLimiter is a flowcontrol.RateLimiter that counts the tokens its
// RateLimiter hands out by whom they were for: requests made while
// serving an HTTP request of this process (their context carries the
// server's http.LocalAddrContextKey; the guard's reviews keep the values
// of the request they review), the test controller's writes, and the rest.
type countingLimiter struct {
	flowcontrol.RateLimiter
	served, reconciles, other atomic.Int64
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	err := l.RateLimiter.Wait(ctx)
	if err != nil {
		return err
	}
	switch {
	case ctx.Value(http.LocalAddrContextKey) != nil:
		l.served.Add(1)
	case ctx.Value(reconcileKey{}) != nil:
		l.reconciles.Add(1)
	default:
		l.other.Add(1)
	}
	return nil
}

func (l *countingLimiter) Accept() {
	l.RateLimiter.Accept()
	l.other.Add(1)
}

func (l *countingLimiter) TryAccept() bool {
	ok := l.RateLimiter.TryAccept()
	if ok {
		l.other.Add(1)
	}
	return ok
}

func (l *countingLimiter) counts() (served, reconciles, other int) {
	return int(l.served.Load()), int(l.reconciles.Load()), int(l.other.Load())
}

// junkRequest GETs url with a random bearer token and returns the status,
// or 0 if no response came.
func junkRequest(ctx context.Context, c *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+base64.RawURLEncoding.EncodeToString(randomBytes(32)))
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// tokenReviewsAtServer returns the TokenReview requests the API server has
// answered since it started: the sum of its apiserver_request_total series
// for resource "tokenreviews", read from its /metrics with the admin
// config. The control plane is this process's own and its tests run one at
// a time, so the difference over a test is the test's.
func tokenReviewsAtServer(t testing.TB) int {
	t.Helper()
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the API server's /metrics: %v", err)
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
			t.Fatalf("the API server's /metrics: cannot parse %q: %v", line, err)
		}
		total += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the API server's /metrics: %v", err)
	}
	return int(total)
}
