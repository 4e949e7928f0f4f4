package httpauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultAllowTTL         = 10 * time.Second
	DefaultDenyTTL          = 5 * time.Second
	DefaultCacheSize        = 1024
	DefaultReviewTimeout    = 5 * time.Second
	DefaultReviewsPerSecond = 10
	DefaultReviewBurst      = 20
)

// Options configures a Guard.
type Options struct {
	// Client creates the TokenReviews and SubjectAccessReviews. Its
	// identity needs create on tokenreviews.authentication.k8s.io and
	// subjectaccessreviews.authorization.k8s.io. Give the Guard a
	// clientset of its own, with a rate limiter of its own (rest.Config's
	// QPS and Burst, or RateLimiter), so that the reviews never spend the
	// request budget of other clients, such as a controller's. A review
	// waits for the client's rate limiter within ReviewTimeout. Required,
	// and not a nil pointer.
	Client kubernetes.Interface
	// AllowTTL is how long an accepted token and an allowed access are
	// remembered: how long a revoked token or a removed permission keeps
	// working. 0 means DefaultAllowTTL.
	AllowTTL time.Duration
	// DenyTTL is how long a rejected token and a denied access are
	// remembered: how long a newly granted permission takes to work.
	// 0 means DefaultDenyTTL.
	DenyTTL time.Duration
	// CacheSize bounds the entries of each of the Guard's four caches:
	// tokens accepted, tokens rejected, accesses allowed, accesses denied.
	// When one is full, its least recently used entry goes; a rejection
	// never evicts an acceptance, so a flood of unknown tokens cannot push
	// a scraper's token out. An accepted token or allowed access stays
	// there past AllowTTL, no longer admitting anything, until evicted, to
	// mark it as known (see ReviewsPerSecond). 0 means DefaultCacheSize.
	CacheSize int
	// ReviewTimeout bounds each review, including its wait for Client's
	// rate limiter. A request whose review has no answer by then is
	// answered 503 Service Unavailable with Retry-After. 0 means
	// DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// ReviewsPerSecond and ReviewBurst are the token bucket that bounds
	// the reviews the Guard creates of what it does not know: tokens not
	// among its accepted ones and accesses not among its allowed ones,
	// TokenReviews and SubjectAccessReviews counted together. So a flood
	// of unknown tokens creates at most ReviewBurst reviews at once and
	// ReviewsPerSecond a second after that: that is the load it can put
	// on the API server. A request that misses the cache when the bucket
	// is empty is answered 429 Too Many Requests with Retry-After, and
	// no review is created. Cached results are never throttled, and
	// neither is the renewal of a known token or access after AllowTTL,
	// of which at most one per token and per access runs at a time.
	// 0 means DefaultReviewsPerSecond and DefaultReviewBurst.
	ReviewsPerSecond float64
	ReviewBurst      int
}

// Guard admits an HTTP request to the handlers it wraps when the API server
// authenticates its bearer token (TokenReview) and authorizes the token's
// user to use its path (SubjectAccessReview). Create it with New; it is
// safe for concurrent use, and one Guard may wrap several handlers, which
// then share its caches.
type Guard struct {
	opts       Options
	retryAfter string                 // the Retry-After of a 429: the seconds the bucket takes to gain a review
	limit      *rate.Limiter          // shared by tokens and access
	tokens     *reviews[tokenResult]  // by sha256 of the token
	access     *reviews[accessResult] // by sha256 of user, verb, path
}

type tokenResult struct {
	user          authenticationv1.UserInfo
	authenticated bool
	reason        string // why not, when the server says
}

func (r tokenResult) admitted() bool { return r.authenticated }

type accessResult struct {
	allowed bool
	reason  string
}

func (r accessResult) admitted() bool { return r.allowed }

// Errors of a review that is not created, or not answered in time.
var (
	errThrottled = errors.New("httpauth: too many reviews of unknown tokens and accesses (Options.ReviewsPerSecond)")
	errTimeout   = errors.New("httpauth: the review was not answered within Options.ReviewTimeout")
)

// New validates opts and returns a Guard. It does not contact the API
// server.
func New(opts Options) (*Guard, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("httpauth: Options.Client is nil: pass a clientset of the Guard's own, e.g. kubernetes.NewForConfig(cfg)"))
	} else if v := reflect.ValueOf(opts.Client); v.Kind() == reflect.Pointer && v.IsNil() {
		errs = append(errs, fmt.Errorf("httpauth: Options.Client is a nil %T: pass a clientset that was built, e.g. the one kubernetes.NewForConfig(cfg) returns", opts.Client))
	}
	bad := func(field string, v any, fix string) {
		errs = append(errs, fmt.Errorf("httpauth: Options.%s is %v: %s", field, v, fix))
	}
	if opts.AllowTTL < 0 {
		bad("AllowTTL", opts.AllowTTL, "use 0 for the default, or a positive duration")
	}
	if opts.DenyTTL < 0 {
		bad("DenyTTL", opts.DenyTTL, "use 0 for the default, or a positive duration")
	}
	if opts.CacheSize < 0 {
		bad("CacheSize", opts.CacheSize, "use 0 for the default, or a positive number of entries")
	}
	if opts.ReviewTimeout < 0 {
		bad("ReviewTimeout", opts.ReviewTimeout, "use 0 for the default, or a positive duration")
	}
	if !(opts.ReviewsPerSecond >= 0) || math.IsInf(opts.ReviewsPerSecond, 0) {
		bad("ReviewsPerSecond", opts.ReviewsPerSecond, "use 0 for the default, or a positive finite number")
	}
	if opts.ReviewBurst < 0 {
		bad("ReviewBurst", opts.ReviewBurst, "use 0 for the default, or a positive number of reviews")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.AllowTTL == 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL == 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.ReviewTimeout == 0 {
		opts.ReviewTimeout = DefaultReviewTimeout
	}
	if opts.ReviewsPerSecond == 0 {
		opts.ReviewsPerSecond = DefaultReviewsPerSecond
	}
	if opts.ReviewBurst == 0 {
		opts.ReviewBurst = DefaultReviewBurst
	}
	g := &Guard{
		opts:       opts,
		retryAfter: strconv.Itoa(max(1, int(math.Ceil(1/opts.ReviewsPerSecond)))),
		limit:      rate.NewLimiter(rate.Limit(opts.ReviewsPerSecond), opts.ReviewBurst),
	}
	g.tokens = newReviews[tokenResult](g)
	g.access = newReviews[accessResult](g)
	return g, nil
}

// Wrap returns a handler that serves a request with next once the Guard
// admits it, and otherwise answers:
//   - 401 Unauthorized when the request has no "Authorization: Bearer"
//     header, or the TokenReview does not authenticate its token;
//   - 403 Forbidden when the SubjectAccessReview does not allow the token's
//     user the request's verb (its method in lower case, "get" for GET) on
//     its path, a non-resource URL such as "/metrics";
//   - 429 Too Many Requests, with Retry-After, when a review is needed and
//     Options.ReviewsPerSecond allows none now; no review is created;
//   - 503 Service Unavailable, with Retry-After, when a review has no
//     answer within Options.ReviewTimeout; the error is logged;
//   - 500 Internal Server Error when a review cannot be created; the error
//     is logged.
//
// It logs through the request context's logger (logr.FromContext): errors,
// and at V(4) why a request was refused. Before calling next it removes the
// Authorization header, so next never sees the token.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		log := logr.FromContextOrDiscard(ctx).WithValues("path", r.URL.Path)
		token, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "Unauthorized: send a bearer token (Authorization: Bearer <token>)", http.StatusUnauthorized)
			return
		}
		tr, err := g.authenticate(ctx, token)
		if err != nil {
			g.fail(w, log, err, "TokenReview")
			return
		}
		if !tr.authenticated {
			log.V(4).Info("Refused a request: token not authenticated", "reason", tr.reason)
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "Unauthorized: the token was not authenticated", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		ar, err := g.authorize(ctx, tr.user, verb, r.URL.Path)
		if err != nil {
			g.fail(w, log.WithValues("user", tr.user.Username, "verb", verb), err, "SubjectAccessReview")
			return
		}
		if !ar.allowed {
			log.V(4).Info("Refused a request: access denied", "user", tr.user.Username, "verb", verb, "reason", ar.reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", tr.user.Username, verb, r.URL.Path), http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
}

// fail answers a request whose review of kind (TokenReview or
// SubjectAccessReview) returned err.
func (g *Guard) fail(w http.ResponseWriter, log logr.Logger, err error, kind string) {
	switch {
	case errors.Is(err, errThrottled):
		log.V(4).Info("Refused a request: too many reviews", "kind", kind)
		w.Header().Set("Retry-After", g.retryAfter)
		http.Error(w, "Too Many Requests: too many tokens to review; retry later", http.StatusTooManyRequests)
	case errors.Is(err, errTimeout):
		log.Error(err, "Cannot review a request in time", "kind", kind, "timeout", g.opts.ReviewTimeout)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable: the API server did not answer the "+kind+" in time; retry later", http.StatusServiceUnavailable)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		log.V(4).Info("Refused a request: the client went away during the review", "kind", kind)
		http.Error(w, "Service Unavailable: the request was canceled", http.StatusServiceUnavailable)
	case kind == "TokenReview":
		log.Error(err, "Cannot authenticate a request")
		http.Error(w, "Internal Server Error: the token could not be reviewed (TokenReview failed); the server's log has the error", http.StatusInternalServerError)
	default:
		log.Error(err, "Cannot authorize a request")
		http.Error(w, "Internal Server Error: the access could not be reviewed (SubjectAccessReview failed); the server's log has the error", http.StatusInternalServerError)
	}
}

// bearerToken returns the token of r's "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate reviews token, or returns the remembered result.
func (g *Guard) authenticate(ctx context.Context, token string) (tokenResult, error) {
	return g.tokens.get(ctx, sha256.Sum256([]byte(token)), func(ctx context.Context) (tokenResult, error) {
		review, err := g.opts.Client.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) {
				err = fmt.Errorf("%w (grant this operator create on tokenreviews.authentication.k8s.io)", err)
			}
			return tokenResult{}, fmt.Errorf("httpauth: creating a TokenReview: %w", err)
		}
		return tokenResult{user: review.Status.User, authenticated: review.Status.Authenticated, reason: review.Status.Error}, nil
	})
}

// authorize reviews whether user may use verb on the non-resource URL
// path, or returns the remembered result.
func (g *Guard) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (accessResult, error) {
	return g.access.get(ctx, accessKey(user, verb, path), func(ctx context.Context) (accessResult, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		}}
		if len(user.Extra) > 0 {
			sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
			for k, v := range user.Extra {
				sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
		review, err := g.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) {
				err = fmt.Errorf("%w (grant this operator create on subjectaccessreviews.authorization.k8s.io)", err)
			}
			return accessResult{}, fmt.Errorf("httpauth: creating a SubjectAccessReview: %w", err)
		}
		res := accessResult{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason}
		if review.Status.EvaluationError != "" {
			res.reason = strings.TrimSpace(res.reason + " (evaluation error: " + review.Status.EvaluationError + ")")
		}
		return res, nil
	})
}

// reviews remembers the results of one kind of review, those that admit
// apart from those that do not, and runs the reviews: one at a time per
// key, within the Guard's ReviewTimeout and, for a key not known to
// admit, its token bucket.
type reviews[R interface{ admitted() bool }] struct {
	g       *Guard
	ok, not *cache[[sha256.Size]byte, R]
	flights flights[[sha256.Size]byte, R]
}

func newReviews[R interface{ admitted() bool }](g *Guard) *reviews[R] {
	return &reviews[R]{
		g:   g,
		ok:  newCache[[sha256.Size]byte, R](g.opts.CacheSize),
		not: newCache[[sha256.Size]byte, R](g.opts.CacheSize),
	}
}

// get returns the fresh result remembered for key, or else the one create
// returns, which it remembers. A failed review is not remembered.
func (rs *reviews[R]) get(ctx context.Context, key [sha256.Size]byte, create func(context.Context) (R, error)) (R, error) {
	if res, fresh, _ := rs.cached(key); fresh {
		return res, nil
	}
	return rs.flights.do(ctx, key, rs.g.opts.ReviewTimeout, func(ctx context.Context) (R, error) {
		// A request that missed the cache just before the previous
		// review of key ended finds its result here.
		res, fresh, known := rs.cached(key)
		if fresh {
			return res, nil
		}
		if !known && !rs.g.limit.Allow() {
			var zero R
			return zero, errThrottled
		}
		res, err := create(ctx)
		if err != nil {
			return res, err
		}
		if res.admitted() {
			rs.not.delete(key)
			rs.ok.put(key, res, rs.g.opts.AllowTTL)
		} else {
			rs.ok.delete(key)
			rs.not.put(key, res, rs.g.opts.DenyTTL)
		}
		return res, nil
	})
}

// cached returns the result remembered for key and whether it is fresh;
// known is whether key is among those that admitted, fresh or not.
func (rs *reviews[R]) cached(key [sha256.Size]byte) (res R, fresh, known bool) {
	if res, fresh, known = rs.ok.get(key); fresh {
		return res, true, true
	}
	if res, fresh, _ := rs.not.get(key); fresh {
		return res, true, known
	}
	var zero R
	return zero, false, known
}

// accessKey identifies a SubjectAccessReview: the user with every field
// the review is given, the verb and the path.
func accessKey(user authenticationv1.UserInfo, verb, path string) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{user.Username, user.UID, verb, path} {
		writeField(h, s)
	}
	writeList(h, user.Groups)
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		writeField(h, k)
		writeList(h, user.Extra[k])
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// writeField writes s prefixed by its length, so that no two sequences of
// fields hash alike.
func writeField(h hash.Hash, s string) {
	_ = binary.Write(h, binary.BigEndian, uint64(len(s)))
	h.Write([]byte(s))
}

func writeList(h hash.Hash, l []string) {
	_ = binary.Write(h, binary.BigEndian, uint64(len(l)))
	for _, s := range l {
		writeField(h, s)
	}
}
