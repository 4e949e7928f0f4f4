package manager

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The shard filter narrows the manager's informers of the sharded
// resources to this member's share, at the one place every informer's
// requests pass whatever client it is built on: the rest config's
// transport. Options.Informers.TweakListOptions marks each informer's
// list and watch with filterMark in shardSelector (no other request has
// it); the filter removes the mark, and on a list or watch of a sharded
// resource puts in its place:
//
//   - in the label mode, ShardLabel(ring)=member added to labelSelector;
//   - in the server-side mode, this member's shardSelector (the ranges it
//     owns under the committed epoch).
//
// In the server-side mode the share changes with the epochs, and an
// informer must then list again: a watch resumed from its last
// resourceVersion would only bring later changes of the new ranges. So
// reselect cuts the watches of the sharded resources (their bodies end as
// if the server had closed them), and answers the next watch of each
// collection that has not listed since with 410 Gone, as the API server
// answers a watch from a resourceVersion it no longer has: client-go's
// reflector then lists, with the new selector, and its store replaces
// what it held (objects out of the new share are deleted from the cache,
// new ones added). What the informers hold is economy, not safety: a
// member reconciles a key only when its view of the epochs permits it
// (sharding.owns).

// filterMark is what the informers' TweakListOptions puts in
// shardSelector for the filter to replace; it is never sent.
const filterMark = "ctrlkit-shard-filter"

// markInformers makes tweak, Options.Informers.TweakListOptions, mark
// every informer's lists and watches for the filter.
func markInformers(tweak func(*metav1.ListOptions)) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
		if o.ShardSelector == "" {
			o.ShardSelector = filterMark
		}
	}
}

// shardFilter is the transport wrapper. Its zero value passes every
// request, the mark removed; use configures it before the informers
// start. Safe for concurrent use.
type shardFilter struct {
	mu        sync.Mutex
	resources map[schema.GroupVersionResource]bool // sharded
	label     string                               // label mode: the term added to labelSelector
	selector  string                               // server-side mode: the shardSelector
	gen       uint64                               // server-side mode: 1, incremented by reselect
	listed    map[string]uint64                    // server-side mode: gen of each collection's last list, by path
	watches   map[*cutBody]struct{}                // server-side mode: open watches
}

// useLabels filters the lists and watches of resources by the label term.
func (f *shardFilter) useLabels(resources []schema.GroupVersionResource, term string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources = gvrSet(resources)
	f.label = term
}

// outsideLabel reports whether, in the label mode, an object of resource
// with labels l is outside the lists and watches the filter lets through.
func (f *shardFilter) outsideLabel(resource schema.GroupVersionResource, l map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.label == "" || !f.resources[resource] {
		return false
	}
	k, v, _ := strings.Cut(f.label, "=")
	return l[k] != v
}

// useServer filters the lists and watches of resources by selector.
func (f *shardFilter) useServer(resources []schema.GroupVersionResource, selector string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources = gvrSet(resources)
	f.selector = selector
	f.gen = 1 // a collection not listed yet is at 0: stale
	f.listed = make(map[string]uint64)
	f.watches = make(map[*cutBody]struct{})
}

func gvrSet(rs []schema.GroupVersionResource) map[schema.GroupVersionResource]bool {
	out := make(map[schema.GroupVersionResource]bool, len(rs))
	for _, r := range rs {
		out[r] = true
	}
	return out
}

// reselect changes the server-side mode's selector: the open watches of
// the sharded resources end, and each collection lists again (see above).
// It never blocks on the network.
func (f *shardFilter) reselect(selector string) {
	f.mu.Lock()
	if selector == f.selector {
		f.mu.Unlock()
		return
	}
	f.selector = selector
	f.gen++
	cut := make([]*cutBody, 0, len(f.watches))
	for b := range f.watches {
		cut = append(cut, b)
	}
	f.mu.Unlock()
	for _, b := range cut {
		b.cutAfter(minWatch - time.Since(b.opened))
	}
}

// minWatch is how long a watch must have lasted for client-go's reflector
// to take its end quietly: one that ends sooner having delivered nothing
// is logged as a warning ("very short watch"). reselect lets a younger
// watch reach that age before cutting it; the reflector waits longer
// than that before it lists again anyway (its backoff, 0.8s and more).
const minWatch = time.Second

// wrap is the rest.Config WrapTransport.
func (f *shardFilter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) { return f.roundTrip(rt, req) })
}

func (f *shardFilter) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.Contains(req.URL.RawQuery, filterMark) {
		return next.RoundTrip(req)
	}
	q := req.URL.Query()
	if q.Get("shardSelector") != filterMark {
		return next.RoundTrip(req)
	}
	q.Del("shardSelector")
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	// A watch from no resourceVersion, or "0", or with sendInitialEvents
	// starts with the whole selected state, as a list does.
	rv := q.Get("resourceVersion")
	initial := q.Get("sendInitialEvents") == "true" || rv == "" || rv == "0"
	path := req.URL.Path
	var server bool
	var gen uint64
	f.mu.Lock()
	if gvr, ok := collection(path); ok && f.resources[gvr] {
		switch {
		case f.label != "":
			q.Set("labelSelector", joinSelectors(q.Get("labelSelector"), f.label))
		case f.selector != "":
			server, gen = true, f.gen
			q.Set("shardSelector", f.selector)
			if watch && !initial && f.listed[path] != gen {
				f.mu.Unlock()
				return gone(req), nil
			}
			if !watch || initial {
				f.listed[path] = gen
			}
		}
	}
	f.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL.RawQuery = q.Encode()
	resp, err := next.RoundTrip(out)
	if err != nil || !server || !watch || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	b := &cutBody{ReadCloser: resp.Body, f: f, opened: time.Now()}
	resp.Body = b
	f.mu.Lock()
	stale := f.gen != gen
	if !stale {
		f.watches[b] = struct{}{}
	}
	f.mu.Unlock()
	if stale { // reselected while the request was on its way
		b.cutAfter(0)
	}
	return resp, nil
}

func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// collection returns the resource whose collection path is (a list or
// watch, in a namespace or across all): /api/v1/configmaps,
// /apis/g/v/namespaces/ns/widgets. A prefix before /api or /apis (a
// proxy's) is allowed.
func collection(path string) (schema.GroupVersionResource, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		var gv schema.GroupVersion
		var rest []string
		switch {
		case s == "api" && i+1 < len(segs):
			gv, rest = schema.GroupVersion{Version: segs[i+1]}, segs[i+2:]
		case s == "apis" && i+2 < len(segs):
			gv, rest = schema.GroupVersion{Group: segs[i+1], Version: segs[i+2]}, segs[i+3:]
		default:
			continue
		}
		switch {
		case len(rest) == 1:
			return gv.WithResource(rest[0]), true
		case len(rest) == 3 && rest[0] == "namespaces":
			return gv.WithResource(rest[2]), true
		}
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{}, false
}

// gone is the answer to a watch that must list first: 410 Gone with
// reason Expired, as the API server answers a watch from a
// resourceVersion it no longer has. client-go's reflector lists again.
func gone(req *http.Request) *http.Response {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Expired","code":410,` +
		`"message":"ctrlkit: this replica's shard changed: list again"}`
	return &http.Response{
		Status: "410 Gone", StatusCode: http.StatusGone, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// cutBody is a watch's response body that reselect can end: once cut,
// reads return io.EOF, which client-go's watch decoder takes for the
// server closing the stream.
type cutBody struct {
	io.ReadCloser
	f       *shardFilter
	opened  time.Time
	stopped atomic.Bool

	mu    sync.Mutex
	timer *time.Timer // a cut to come; stopped by Close
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.stopped.Load() {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.stopped.Load() {
		return 0, io.EOF // the read that the cut's Close interrupted
	}
	return n, err
}

// Close forgets the watch, stops a cut to come, and closes the body.
func (b *cutBody) Close() error {
	b.f.mu.Lock()
	delete(b.f.watches, b)
	b.f.mu.Unlock()
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

// cutAfter cuts the watch after d (at once if d <= 0), on a timer's
// goroutine; a second call before the first cut keeps the first.
func (b *cutBody) cutAfter(d time.Duration) {
	if d <= 0 {
		b.cut()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer == nil {
		b.timer = time.AfterFunc(d, b.cut)
	}
}

// cut ends the watch: a Read in progress returns, and later ones return
// io.EOF.
func (b *cutBody) cut() {
	b.stopped.Store(true)
	_ = b.ReadCloser.Close()
}
