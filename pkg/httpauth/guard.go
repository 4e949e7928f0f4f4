package httpauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultAllowTTL  = 10 * time.Second
	DefaultDenyTTL   = 5 * time.Second
	DefaultCacheSize = 1024
)

// Options configures a Guard.
type Options struct {
	// Client creates the TokenReviews and SubjectAccessReviews. Its
	// identity needs create on tokenreviews.authentication.k8s.io and
	// subjectaccessreviews.authorization.k8s.io. Required.
	Client kubernetes.Interface
	// AllowTTL is how long an accepted token and an allowed access are
	// remembered: how long a revoked token or a removed permission keeps
	// working. 0 means DefaultAllowTTL.
	AllowTTL time.Duration
	// DenyTTL is how long a rejected token and a denied access are
	// remembered: how long a newly granted permission takes to work.
	// 0 means DefaultDenyTTL.
	DenyTTL time.Duration
	// CacheSize bounds the entries of each of the two caches (tokens, and
	// accesses); when one is full, the least recently used entry goes.
	// 0 means DefaultCacheSize.
	CacheSize int
}

// Guard admits an HTTP request to the handlers it wraps when the API server
// authenticates its bearer token (TokenReview) and authorizes the token's
// user to use its path (SubjectAccessReview). Create it with New; it is
// safe for concurrent use, and one Guard may wrap several handlers, which
// then share its caches.
type Guard struct {
	opts   Options
	tokens *cache[[sha256.Size]byte, tokenResult]  // by sha256 of the token
	access *cache[[sha256.Size]byte, accessResult] // by sha256 of user, verb, path
}

type tokenResult struct {
	user          authenticationv1.UserInfo
	authenticated bool
	reason        string // why not, when the server says
}

type accessResult struct {
	allowed bool
	reason  string
}

// New validates opts and returns a Guard. It does not contact the API
// server.
func New(opts Options) (*Guard, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("httpauth: Options.Client is nil: pass the clientset the reviews are created with (e.g. Manager.Kubernetes())"))
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
	return &Guard{
		opts:   opts,
		tokens: newCache[[sha256.Size]byte, tokenResult](opts.CacheSize),
		access: newCache[[sha256.Size]byte, accessResult](opts.CacheSize),
	}, nil
}

// Wrap returns a handler that serves a request with next once the Guard
// admits it, and otherwise answers:
//   - 401 Unauthorized when the request has no "Authorization: Bearer"
//     header, or the TokenReview does not authenticate its token;
//   - 403 Forbidden when the SubjectAccessReview does not allow the token's
//     user the request's verb (its method in lower case, "get" for GET) on
//     its path, a non-resource URL such as "/metrics";
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
			log.Error(err, "Cannot authenticate a request")
			http.Error(w, "Internal Server Error: the token could not be reviewed (TokenReview failed); the server's log has the error", http.StatusInternalServerError)
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
			log.Error(err, "Cannot authorize a request", "user", tr.user.Username, "verb", verb)
			http.Error(w, "Internal Server Error: the access could not be reviewed (SubjectAccessReview failed); the server's log has the error", http.StatusInternalServerError)
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
	key := sha256.Sum256([]byte(token))
	if res, ok := g.tokens.get(key); ok {
		return res, nil
	}
	review, err := g.opts.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w (grant this operator create on tokenreviews.authentication.k8s.io)", err)
		}
		return tokenResult{}, fmt.Errorf("httpauth: creating a TokenReview: %w", err)
	}
	res := tokenResult{user: review.Status.User, authenticated: review.Status.Authenticated, reason: review.Status.Error}
	g.tokens.put(key, res, g.ttl(res.authenticated))
	return res, nil
}

// authorize reviews whether user may use verb on the non-resource URL
// path, or returns the remembered result.
func (g *Guard) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (accessResult, error) {
	key := accessKey(user, verb, path)
	if res, ok := g.access.get(key); ok {
		return res, nil
	}
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
	g.access.put(key, res, g.ttl(res.allowed))
	return res, nil
}

func (g *Guard) ttl(admitted bool) time.Duration {
	if admitted {
		return g.opts.AllowTTL
	}
	return g.opts.DenyTTL
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
