package httpauth_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	k8stesting "k8s.io/client-go/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeAPI answers TokenReviews and SubjectAccessReviews from its maps, the
// way kube-apiserver would, and counts them.
type fakeAPI struct {
	kube *fake.Clientset

	mu                  sync.Mutex
	users               map[string]authenticationv1.UserInfo // by token
	allowed             map[string][]string                  // username → "verb path"
	tokenErr, accessErr error                                // returned by the next reviews while set
	sars                []authorizationv1.SubjectAccessReviewSpec

	tokenReviews, accessReviews atomic.Int64
}

func newFakeAPI() *fakeAPI {
	a := &fakeAPI{
		kube:    fake.NewClientset(),
		users:   make(map[string]authenticationv1.UserInfo),
		allowed: make(map[string][]string),
	}
	a.kube.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.tokenReviews.Add(1)
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tokenErr != nil {
			return true, nil, a.tokenErr
		}
		if u, ok := a.users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	a.kube.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.accessReviews.Add(1)
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.sars = append(a.sars, sar.Spec)
		if a.accessErr != nil {
			return true, nil, a.accessErr
		}
		if na := sar.Spec.NonResourceAttributes; na != nil && slices.Contains(a.allowed[sar.Spec.User], na.Verb+" "+na.Path) {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed"}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	return a
}

// user makes token authenticate as a user named name, allowed accesses
// such as "get /metrics".
func (a *fakeAPI) user(token, name string, accesses ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[token] = authenticationv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"system:authenticated"}}
	a.allowed[name] = accesses
}

func (a *fakeAPI) failReviews(tokenErr, accessErr error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokenErr, a.accessErr = tokenErr, accessErr
}

func (a *fakeAPI) lastSAR() authorizationv1.SubjectAccessReviewSpec {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sars[len(a.sars)-1]
}

// calls returns how many reviews of each kind were created.
func (a *fakeAPI) calls() (tokens, accesses int64) {
	return a.tokenReviews.Load(), a.accessReviews.Load()
}

// okHandler answers "ok", and fails the test if it sees the token.
func okHandler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			t.Errorf("the wrapped handler sees Authorization %q, want it removed", h)
		}
		_, _ = w.Write([]byte("ok"))
	})
}

// logBuffer is a logger that writes to a buffer, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 4})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// do serves one request through h with method on path, carrying the
// Authorization header auth (none when empty) and log in its context.
func do(h http.Handler, method, path, auth string, log logr.Logger) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	r = r.WithContext(logr.NewContext(r.Context(), log))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var errDown = errors.New("connection refused")

// gated is a's clientset, whose TokenReviews wait for tokens to close and
// whose SubjectAccessReviews wait for accesses to close (a nil channel: no
// wait) before they reach the fake. They wait outside the fake's lock,
// which its reactors run under, so that in a synctest bubble every review
// waits durably, side by side.
func (a *fakeAPI) gated(tokens, accesses <-chan struct{}) kubernetes.Interface {
	return gatedClient{Clientset: a.kube, tokens: tokens, accesses: accesses}
}

type gatedClient struct {
	*fake.Clientset
	tokens, accesses <-chan struct{}
}

func (c gatedClient) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return gatedAuthentication{c.Clientset.AuthenticationV1(), c.tokens}
}

func (c gatedClient) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return gatedAuthorization{c.Clientset.AuthorizationV1(), c.accesses}
}

type gatedAuthentication struct {
	authenticationv1client.AuthenticationV1Interface
	gate <-chan struct{}
}

func (g gatedAuthentication) TokenReviews() authenticationv1client.TokenReviewInterface {
	return gatedTokenReviews{g.AuthenticationV1Interface.TokenReviews(), g.gate}
}

type gatedTokenReviews struct {
	authenticationv1client.TokenReviewInterface
	gate <-chan struct{}
}

func (g gatedTokenReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	if g.gate != nil {
		<-g.gate
	}
	return g.TokenReviewInterface.Create(ctx, tr, opts)
}

type gatedAuthorization struct {
	authorizationv1client.AuthorizationV1Interface
	gate <-chan struct{}
}

func (g gatedAuthorization) SubjectAccessReviews() authorizationv1client.SubjectAccessReviewInterface {
	return gatedAccessReviews{g.AuthorizationV1Interface.SubjectAccessReviews(), g.gate}
}

type gatedAccessReviews struct {
	authorizationv1client.SubjectAccessReviewInterface
	gate <-chan struct{}
}

func (g gatedAccessReviews) Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	if g.gate != nil {
		<-g.gate
	}
	return g.SubjectAccessReviewInterface.Create(ctx, sar, opts)
}
