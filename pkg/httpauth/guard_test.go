package httpauth_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
)

func newGuard(t *testing.T, opts httpauth.Options) *httpauth.Guard {
	t.Helper()
	g, err := httpauth.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func TestStatus(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", fmt.Errorf("no RBAC policy matched"))
	tests := []struct {
		name              string
		method, auth      string
		tokenErr, sarErr  error
		wantCode          int
		wantBody, wantLog []string
		wantChallenge     bool
		wantReviews       [2]int64 // TokenReviews, SubjectAccessReviews
	}{
		{name: "no Authorization header", wantCode: 401, wantBody: []string{"send a bearer token"}, wantChallenge: true},
		{name: "not a bearer token", auth: "Basic dXNlcjpwYXNz", wantCode: 401, wantChallenge: true},
		{name: "empty bearer token", auth: "Bearer  ", wantCode: 401, wantChallenge: true},
		{
			name: "token not authenticated", auth: "Bearer stolen", wantCode: 401, wantChallenge: true,
			wantBody: []string{"not authenticated"}, wantLog: []string{"invalid bearer token"}, wantReviews: [2]int64{1, 0},
		},
		{
			name: "authenticated, not authorized", auth: "Bearer reader", method: "POST", wantCode: 403,
			wantBody: []string{`user "reader" may not post /metrics`}, wantLog: []string{"no RBAC policy matched"}, wantReviews: [2]int64{1, 1},
		},
		{name: "authorized", auth: "Bearer reader", wantCode: 200, wantBody: []string{"ok"}, wantReviews: [2]int64{1, 1}},
		{name: "scheme in any case", auth: "bearer reader", wantCode: 200, wantReviews: [2]int64{1, 1}},
		{
			name: "TokenReview fails", auth: "Bearer reader", tokenErr: errDown, wantCode: 500,
			wantBody: []string{"TokenReview failed"}, wantLog: []string{"creating a TokenReview: connection refused"}, wantReviews: [2]int64{1, 0},
		},
		{
			name: "TokenReview forbidden", auth: "Bearer reader", tokenErr: forbidden, wantCode: 500,
			wantLog: []string{"grant this operator create on tokenreviews.authentication.k8s.io"}, wantReviews: [2]int64{1, 0},
		},
		{
			name: "SubjectAccessReview fails", auth: "Bearer reader", sarErr: errDown, wantCode: 500,
			wantBody: []string{"SubjectAccessReview failed"}, wantLog: []string{"creating a SubjectAccessReview: connection refused"}, wantReviews: [2]int64{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			api.user("reader", "reader", "get /metrics")
			api.failReviews(tt.tokenErr, tt.sarErr)
			var log logBuffer
			w := do(newGuard(t, httpauth.Options{Client: api.kube}).Wrap(okHandler(t)), cmpOr(tt.method, "GET"), "/metrics", tt.auth, log.logger())
			if w.Code != tt.wantCode {
				t.Errorf("status %d, want %d (body %q)", w.Code, tt.wantCode, w.Body)
			}
			for _, s := range tt.wantBody {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("body %q does not contain %q", w.Body, s)
				}
			}
			for _, s := range tt.wantLog {
				if !strings.Contains(log.String(), s) {
					t.Errorf("log %q does not contain %q", log.String(), s)
				}
			}
			if got := w.Header().Get("WWW-Authenticate"); (got == "Bearer") != tt.wantChallenge {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge: %v", got, tt.wantChallenge)
			}
			if tokens, accesses := api.calls(); [2]int64{tokens, accesses} != tt.wantReviews {
				t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want %v", tokens, accesses, tt.wantReviews)
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestSubjectAccessReview: the review carries the authenticated user whole,
// and the request's lower-case method and path as a non-resource access.
func TestSubjectAccessReview(t *testing.T) {
	api := newFakeAPI()
	api.users["t"] = authenticationv1.UserInfo{
		Username: "system:serviceaccount:monitoring:prometheus",
		UID:      "1234",
		Groups:   []string{"system:serviceaccounts", "system:authenticated"},
		Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
	}
	do(newGuard(t, httpauth.Options{Client: api.kube}).Wrap(okHandler(t)), "HEAD", "/debug/pprof/heap", "Bearer t", logr.Discard())
	got := api.lastSAR()
	if got.User != "system:serviceaccount:monitoring:prometheus" || got.UID != "1234" ||
		strings.Join(got.Groups, ",") != "system:serviceaccounts,system:authenticated" ||
		strings.Join(got.Extra["authentication.kubernetes.io/pod-name"], ",") != "prometheus-0" {
		t.Errorf("review of user %q uid %q groups %v extra %v, want the TokenReview's user", got.User, got.UID, got.Groups, got.Extra)
	}
	if na := got.NonResourceAttributes; na == nil || na.Verb != "head" || na.Path != "/debug/pprof/heap" || got.ResourceAttributes != nil {
		t.Errorf("review of %+v and %+v, want the non-resource access head /debug/pprof/heap", na, got.ResourceAttributes)
	}
}

// TestCacheTTL runs in a synctest bubble, whose clock moves only when every
// goroutine in it waits: a cached result is reused until its TTL, the
// denied ones for the shorter DenyTTL, and a failed review is not cached.
func TestCacheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI()
		api.user("reader", "reader", "get /metrics")
		api.user("nobody", "nobody")
		h := newGuard(t, httpauth.Options{Client: api.kube, AllowTTL: 10 * time.Second, DenyTTL: 2 * time.Second}).Wrap(okHandler(t))
		step := func(auth string, wantCode int, wantReviews [2]int64) {
			t.Helper()
			if w := do(h, "GET", "/metrics", auth, logr.Discard()); w.Code != wantCode {
				t.Fatalf("%s: status %d, want %d", auth, w.Code, wantCode)
			}
			if tokens, accesses := api.calls(); [2]int64{tokens, accesses} != wantReviews {
				t.Fatalf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %v", auth, tokens, accesses, wantReviews)
			}
		}
		step("Bearer reader", 200, [2]int64{1, 1})
		step("Bearer reader", 200, [2]int64{1, 1}) // cached
		step("Bearer nobody", 403, [2]int64{2, 2})
		step("Bearer nobody", 403, [2]int64{2, 2}) // the token's and the denial both cached
		step("Bearer stolen", 401, [2]int64{3, 2})
		step("Bearer stolen", 401, [2]int64{3, 2})

		time.Sleep(2*time.Second + time.Millisecond) // the denials expire, not the rest
		step("Bearer reader", 200, [2]int64{3, 2})
		step("Bearer nobody", 403, [2]int64{3, 3}) // its token is still known, its denial is not
		step("Bearer stolen", 401, [2]int64{4, 3})

		time.Sleep(8 * time.Second) // 10s since reader's reviews
		step("Bearer reader", 200, [2]int64{5, 4})

		// A review that fails is not remembered: the next request asks again.
		api.failReviews(errDown, nil)
		step("Bearer new", 500, [2]int64{6, 4})
		api.failReviews(nil, nil)
		api.user("new", "new", "get /metrics")
		step("Bearer new", 200, [2]int64{7, 5})
	})
}

// TestCacheSize: each cache keeps the CacheSize most recently used entries.
func TestCacheSize(t *testing.T) {
	api := newFakeAPI()
	for _, u := range []string{"a", "b", "c"} {
		api.user(u, u, "get /metrics")
	}
	h := newGuard(t, httpauth.Options{Client: api.kube, CacheSize: 2}).Wrap(okHandler(t))
	reviews := func(token string) int64 {
		t.Helper()
		before, _ := api.calls()
		if w := do(h, "GET", "/metrics", "Bearer "+token, logr.Discard()); w.Code != 200 {
			t.Fatalf("%s: status %d, want 200", token, w.Code)
		}
		after, _ := api.calls()
		return after - before
	}
	for i, step := range []struct {
		token string
		want  int64
	}{
		{"a", 1}, {"b", 1}, {"a", 0}, // a used after b
		{"c", 1},           // evicts b, the least recently used
		{"a", 0}, {"b", 1}, // b evicts c
		{"c", 1},
	} {
		if got := reviews(step.token); got != step.want {
			t.Errorf("step %d, token %s: %d TokenReviews, want %d", i, step.token, got, step.want)
		}
	}
}

// TestConcurrent serves many requests of several users at once (run it with
// -race): each gets its own answer, and once every result is cached no
// review is created.
func TestConcurrent(t *testing.T) {
	api := newFakeAPI()
	want := map[string]int{"Bearer stolen": 401}
	for i := range 8 {
		tok := fmt.Sprintf("t%d", i)
		if i%2 == 0 {
			api.user(tok, tok, "get /metrics")
			want["Bearer "+tok] = 200
		} else {
			api.user(tok, tok)
			want["Bearer "+tok] = 403
		}
	}
	h := newGuard(t, httpauth.Options{Client: api.kube, AllowTTL: time.Hour, DenyTTL: time.Hour}).Wrap(okHandler(t))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				for auth, code := range want {
					if w := do(h, "GET", "/metrics", auth, logr.Discard()); w.Code != code {
						t.Errorf("%s: status %d, want %d", auth, w.Code, code)
					}
				}
			}
		})
	}
	wg.Wait()
	tokens, accesses := api.calls()
	if tokens < 9 || accesses < 8 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want at least one per token and per user", tokens, accesses)
	}
	for auth, code := range want {
		if w := do(h, "GET", "/metrics", auth, logr.Discard()); w.Code != code {
			t.Errorf("%s: status %d, want %d", auth, w.Code, code)
		}
	}
	if t2, a2 := api.calls(); t2 != tokens || a2 != accesses {
		t.Errorf("requests after every result was cached created %d TokenReviews and %d SubjectAccessReviews, want none", t2-tokens, a2-accesses)
	}
}

// TestAccessCachedByUser: two tokens of one user share the access review;
// two users do not.
func TestAccessCachedByUser(t *testing.T) {
	api := newFakeAPI()
	api.user("old", "prometheus", "get /metrics")
	api.user("rotated", "prometheus", "get /metrics")
	api.user("other", "grafana")
	h := newGuard(t, httpauth.Options{Client: api.kube}).Wrap(okHandler(t))
	for _, tc := range []struct {
		token string
		code  int
	}{{"old", 200}, {"rotated", 200}, {"other", 403}} {
		if w := do(h, "GET", "/metrics", "Bearer "+tc.token, logr.Discard()); w.Code != tc.code {
			t.Errorf("%s: status %d, want %d", tc.token, w.Code, tc.code)
		}
	}
	if tokens, accesses := api.calls(); tokens != 3 || accesses != 2 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want 3 and 2", tokens, accesses)
	}
}

func TestNewValidates(t *testing.T) {
	api := newFakeAPI()
	tests := []struct {
		name string
		opts httpauth.Options
		want []string
	}{
		{name: "defaults", opts: httpauth.Options{Client: api.kube}},
		{name: "no client", opts: httpauth.Options{}, want: []string{"Options.Client is nil"}},
		{
			name: "nil clientset pointer", opts: httpauth.Options{Client: (*kubernetes.Clientset)(nil)},
			want: []string{"Options.Client is a nil *kubernetes.Clientset", "kubernetes.NewForConfig"},
		},
		{
			name: "negative fields",
			opts: httpauth.Options{Client: api.kube, AllowTTL: -1, DenyTTL: -time.Second, CacheSize: -1, ReviewTimeout: -time.Second, ReviewsPerSecond: -1, ReviewBurst: -1},
			want: []string{
				"Options.AllowTTL is -1ns", "Options.DenyTTL is -1s", "Options.CacheSize is -1", "use 0 for the default",
				"Options.ReviewTimeout is -1s", "Options.ReviewsPerSecond is -1", "Options.ReviewBurst is -1",
			},
		},
		{name: "unbounded reviews", opts: httpauth.Options{Client: api.kube, ReviewsPerSecond: math.Inf(1)}, want: []string{"Options.ReviewsPerSecond is +Inf", "finite"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httpauth.New(tt.opts)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want an error containing %q", tt.want)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}
