package leader

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// leaseLock is the Lease lock of an Elector built by NewForConfig. It
// keeps client-go's resourcelock.LeaseLock protocol exactly: Get reads the
// Lease, Create creates it, and Update sends the whole Lease as last read
// or written, so the API server applies it only if its resourceVersion is
// still current. What differs is the cost. Every replica sends one Lease
// request per RetryPeriod for as long as it runs, and through client-go's
// typed client each one built its URL, its metrics' URL template and its
// query afresh and decoded the whole answer, managedFields included:
// about 16 KB of garbage in 203 allocations per renewal, against 8 KB in
// 91 here (BenchmarkLease in bench/, make bench-lease). A sharded replica
// keeps two Leases, and that steady garbage left room between the objects
// its informers cached meanwhile (bench/shard/README.md). Here the URL is built once, the body is
// encoded into a reused buffer, the answer is read into another, and its
// managedFields are cut before it is decoded.
//
// Requests go through the rest config's transport (its credentials and
// the manager's request metrics), with its user agent and its timeout,
// and wait for its rate limiter, as a rest client's do.
//
// Like client-go's, it is used by one goroutine at a time.
type leaseLock struct {
	client    *http.Client
	limiter   flowcontrol.RateLimiter // nil: none
	timeout   time.Duration           // of each request; 0: none
	agent     string                  // the User-Agent header; "": the transport's
	leaseURL  string                  // the Lease's
	leasesURL string                  // its namespace's Leases, where it is created
	name      string
	namespace string
	identity  string

	lease       *coordinationv1.Lease // as last read or written; nil before
	alloc       runtime.SimpleAllocator
	encoder     runtime.Encoder // of request bodies: protobuf, or JSON
	contentType string          // of request bodies
	accept      string          // the Accept header
	body        bytes.Buffer    // the last request's body
	sent        *requestBody    // and as the transport reads it
	answer      bytes.Buffer
	raw         []byte // the record Get last returned, encoded
	scratch     []byte
}

var _ resourcelock.Interface = (*leaseLock)(nil)

// leaseResource names the Lease resource in errors.
var leaseResource = schema.GroupResource{Group: coordinationv1.GroupName, Resource: "leases"}

// newLeaseLock returns the lock of the Lease namespace/name, sent through
// cfg's HTTP client.
func newLeaseLock(cfg *rest.Config, namespace, name, identity string) (*leaseLock, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	leases := base.JoinPath("apis", coordinationv1.GroupName, "v1", "namespaces", namespace, "leases")
	// The query client-go's requests carry: the API server ends a request
	// at its timeout too.
	query := ""
	if cfg.Timeout > 0 {
		query = "?" + url.Values{"timeout": {cfg.Timeout.String()}}.Encode()
	}
	limiter := cfg.RateLimiter
	if limiter == nil && cfg.QPS >= 0 { // as a rest client: 0 means the defaults, < 0 no limit
		limiter = flowcontrol.NewTokenBucketRateLimiter(cmp.Or(cfg.QPS, rest.DefaultQPS), cmp.Or(cfg.Burst, rest.DefaultBurst))
	}
	l := &leaseLock{
		// cfg.Timeout is applied by send, through the request's context:
		// http.Client's own costs a goroutine and a timer per request.
		client:    &http.Client{Transport: rt},
		timeout:   cfg.Timeout,
		agent:     cmp.Or(cfg.UserAgent, rest.DefaultKubernetesUserAgent()),
		limiter:   limiter,
		leasesURL: leases.String() + query,
		leaseURL:  leases.JoinPath(name).String() + query,
		name:      name,
		namespace: namespace,
		identity:  identity,
		// Protobuf, which every kube-apiserver serves for Leases, unless
		// the config asks for JSON (a proxy in front of the API server
		// that only speaks JSON, say).
		encoder:     protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		contentType: runtime.ContentTypeProtobuf,
		accept:      runtime.ContentTypeProtobuf + ", " + runtime.ContentTypeJSON,
	}
	if mt, _, _ := mime.ParseMediaType(cfg.ContentType); mt == runtime.ContentTypeJSON {
		l.encoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{})
		l.contentType, l.accept = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	}
	return l, nil
}

// Get reads the Lease and returns its record, and the record encoded
// (client-go's elector compares these bytes to tell a changed record).
func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := l.send(ctx, http.MethodGet, l.leaseURL, nil); err != nil {
		return nil, nil, err
	}
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&l.lease.Spec)
	// The bytes last returned are returned again while the record is
	// unchanged: a standby polls an unchanged Lease every RetryPeriod.
	l.scratch = appendRecord(l.scratch[:0], rec)
	if !bytes.Equal(l.scratch, l.raw) {
		l.raw = bytes.Clone(l.scratch) // the elector keeps what it was given
	}
	return rec, l.raw, nil
}

// Create creates the Lease with rec.
func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&rec),
	}
	return l.send(ctx, http.MethodPost, l.leasesURL, lease)
}

// Update writes rec over the Lease as last read or written: the API
// server refuses it (a conflict) if the Lease changed since.
func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("leader: the Lease was neither read nor created before this update")
	}
	l.lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	return l.send(ctx, http.MethodPut, l.leaseURL, l.lease)
}

// RecordEvent records nothing: the Elector logs leadership changes.
func (l *leaseLock) RecordEvent(string) {}

// Identity is this replica's identity.
func (l *leaseLock) Identity() string { return l.identity }

// Describe names the Lease, as namespace/name.
func (l *leaseLock) Describe() string { return l.namespace + "/" + l.name }

// send sends method to u with lease (nil: no body) and, on
// success, keeps the Lease the API server answered. A refusal is returned
// as an apierrors error, as client-go's clients return it.
func (l *leaseLock) send(ctx context.Context, method, u string, lease *coordinationv1.Lease) error {
	if l.limiter != nil {
		if err := l.limiter.Wait(ctx); err != nil {
			return err
		}
	}
	if dl, ok := ctx.Deadline(); l.timeout > 0 && (!ok || time.Until(dl) > l.timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	var body *requestBody
	if lease != nil {
		if l.sent != nil && !l.sent.closed.Load() {
			// The transport may still read the last body (after an
			// error, RoundTrip may return before it closed it): leave
			// that buffer to it.
			l.body = bytes.Buffer{}
		}
		lease.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
		l.body.Reset()
		var err error
		if enc, ok := l.encoder.(runtime.EncoderWithAllocator); ok {
			err = enc.EncodeWithAllocator(lease, &l.body, &l.alloc)
		} else {
			err = l.encoder.Encode(lease, &l.body)
		}
		lease.TypeMeta = metav1.TypeMeta{}
		if err != nil {
			return fmt.Errorf("leader: encoding the Lease: %w", err)
		}
		body = &requestBody{}
		body.Reset(l.body.Bytes())
		l.sent = body
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	if body != nil {
		req.Body, req.ContentLength = body, int64(body.Len())
	}
	req.Header.Set("Accept", l.accept)
	if l.agent != "" {
		// Set here, the transport's user agent wrapper need not copy
		// the request to set it.
		req.Header.Set("User-Agent", l.agent)
	}
	if lease != nil {
		req.Header.Set("Content-Type", l.contentType)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	l.answer.Reset()
	_, err = l.answer.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return &url.Error{Op: req.Method, URL: u, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return l.refusal(resp, method)
	}
	got, err := l.decode(resp.Header.Get("Content-Type"), l.answer.Bytes())
	if err != nil {
		return fmt.Errorf("leader: decoding the Lease %s/%s the API server answered: %w", l.namespace, l.name, err)
	}
	l.lease = got
	return nil
}

// decode decodes data, a Lease of the given content type, without its
// managedFields.
func (l *leaseLock) decode(contentType string, data []byte) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	if kind, raw, ok := protolist.Unwrap(data); ok {
		if string(kind) != "Lease" {
			return nil, fmt.Errorf("a %q, not a Lease", kind)
		}
		raw, _ = protolist.Slim{ManagedFields: true}.Object(raw)
		return lease, lease.Unmarshal(raw)
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt != runtime.ContentTypeJSON {
		return nil, fmt.Errorf("content type %q", contentType)
	}
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDeserializer(), data, lease); err != nil {
		return nil, err
	}
	lease.ManagedFields = nil
	return lease, nil
}

// refusal is the error of resp, an answer other than 2xx to method: the
// Status the API server sent, or one made from the status code.
func (l *leaseLock) refusal(resp *http.Response, method string) error {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(l.answer.Bytes(), nil, nil)
	if status, ok := obj.(*metav1.Status); err == nil && ok && status.Status == metav1.StatusFailure {
		return &apierrors.StatusError{ErrStatus: *status}
	}
	msg := strings.TrimSpace(l.answer.String())
	return apierrors.NewGenericServerResponse(resp.StatusCode, method, leaseResource, l.name, msg, 0, true)
}

// appendRecord appends rec, encoded, to b.
func appendRecord(b []byte, rec *resourcelock.LeaderElectionRecord) []byte {
	b = strconv.AppendQuote(b, rec.HolderIdentity)
	b = strconv.AppendInt(append(b, ' '), int64(rec.LeaseDurationSeconds), 10)
	b = strconv.AppendInt(append(b, ' '), rec.AcquireTime.UnixNano(), 10)
	b = strconv.AppendInt(append(b, ' '), rec.RenewTime.UnixNano(), 10)
	b = strconv.AppendInt(append(b, ' '), int64(rec.LeaderTransitions), 10)
	b = strconv.AppendQuote(append(b, ' '), string(rec.Strategy))
	b = strconv.AppendQuote(append(b, ' '), rec.PreferredHolder)
	return b
}

// requestBody is a request's body, read from the lock's buffer, that
// tells when the transport is done with it: only then may the buffer be
// written again.
type requestBody struct {
	bytes.Reader
	closed atomic.Bool
}

// Close records that the transport is done with the body.
func (b *requestBody) Close() error {
	b.closed.Store(true)
	return nil
}
