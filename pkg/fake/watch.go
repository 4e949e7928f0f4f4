package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// event is one change to the store.
type event struct {
	typ watch.EventType // Added, Modified or Deleted
	res *resource
	obj runtime.Object // the new state; for Deleted the last, with the deletion's resourceVersion
	old runtime.Object // the state before, nil for Added
	rv  uint64
}

// watcher is an open watch. Events reach it through ch, which notify fills
// without blocking and closes when the watcher falls bufferSize events
// behind or is dropped.
type watcher struct {
	res *resource
	ns  string
	sel selectors
	ch  chan watchEvent
}

// watchEvent is an event as one watcher sees it.
type watchEvent struct {
	typ watch.EventType
	obj runtime.Object // stored, never changed: encode a copy
}

// filter returns e as w sees it, as kube-apiserver's watch cache does: an
// object that starts to match the selectors is ADDED, one that stops
// matching is DELETED. (An object never starts or stops matching a
// shardSelector: the uid and namespace it hashes do not change.)
func (w *watcher) filter(e event) (watchEvent, bool) {
	if e.res != w.res {
		return watchEvent{}, false
	}
	now := w.sel.matches(e.obj, w.ns)
	before := e.old != nil && w.sel.matches(e.old, w.ns)
	switch {
	case e.typ == watch.Deleted && before:
		return watchEvent{watch.Deleted, e.obj}, true
	case e.typ == watch.Deleted:
		return watchEvent{}, false
	case now && before:
		return watchEvent{watch.Modified, e.obj}, true
	case now:
		return watchEvent{watch.Added, e.obj}, true
	case before:
		return watchEvent{watch.Deleted, e.obj}, true
	}
	return watchEvent{}, false
}

// notify records e in the history and hands it to the watchers; called
// with c.mu held. A watcher whose buffer is full is dropped: its stream
// ends, and the client watches again from the last resourceVersion it saw.
func (c *Cluster) notify(e event) {
	c.history = append(c.history, e)
	if drop := len(c.history) - c.historyLimit; drop > 0 {
		c.compacted = c.history[drop-1].rv
		c.history = slices.Delete(c.history, 0, drop)
	}
	for w := range c.watchers {
		if we, ok := w.filter(e); ok {
			select {
			case w.ch <- we:
			default:
				c.dropWatcher(w)
			}
		}
	}
}

// dropWatcher unregisters w and closes its channel; called with c.mu held.
func (c *Cluster) dropWatcher(w *watcher) {
	if _, ok := c.watchers[w]; ok {
		delete(c.watchers, w)
		close(w.ch)
	}
}

// watch answers a watch request with a response whose body streams the
// events, encoded for out.
//
// Initial events: with sendInitialEvents=true, an ADDED event for each
// matching object followed by a BOOKMARK whose object carries the
// annotation k8s.io/initial-events-end; without sendInitialEvents and
// with resourceVersion "" or "0", the ADDED events alone; with another
// resourceVersion, the events after it from the history, 410 Gone if the
// history no longer reaches back that far, or kube-apiserver's "Too large
// resource version" error if it is in the future.
func (c *Cluster) watch(req *http.Request, r *resource, ns string, out output) (*http.Response, error) {
	opts := &metainternalversion.ListOptions{}
	if err := decodeQuery(req, opts); err != nil {
		return nil, err
	}
	sel, err := c.selectorsOf(opts)
	if err != nil {
		return nil, err
	}
	w := &watcher{res: r, ns: ns, sel: sel, ch: make(chan watchEvent, c.bufferSize)}
	initial, err := c.register(w, opts)
	if err != nil {
		return nil, err
	}

	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	pr, pw := io.Pipe()
	body := &watchBody{PipeReader: pr, closed: make(chan struct{})}
	go c.stream(req.Context(), r, out, w, pw, body.closed, initial, timeout)
	resp := response(req, http.StatusOK, out.contentType(true), nil)
	resp.Body = body
	resp.ContentLength = -1
	return resp, nil
}

// register chooses the events to replay to w and registers it, under one
// lock so that no event is missed or sent twice.
func (c *Cluster) register(w *watcher, opts *metainternalversion.ListOptions) ([]watchEvent, error) {
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	legacyInitial := opts.SendInitialEvents == nil && (opts.ResourceVersion == "" || opts.ResourceVersion == "0")
	var initial []watchEvent

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case sendInitial || legacyInitial:
		for _, obj := range c.list(w.res, w.ns, w.sel) {
			initial = append(initial, watchEvent{watch.Added, obj})
		}
		if sendInitial {
			bookmark := w.res.new()
			m, _ := meta.Accessor(bookmark)
			m.SetResourceVersion(strconv.FormatUint(c.rv, 10))
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			initial = append(initial, watchEvent{watch.Bookmark, bookmark})
		}
	default:
		from, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", opts.ResourceVersion))
		}
		if from < c.compacted {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, c.compacted))
		}
		if from > c.rv {
			// kube-apiserver waits a few seconds for its cache to catch
			// up, then answers this; the fake's store is never behind.
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusGatewayTimeout,
				Reason:  metav1.StatusReasonTimeout,
				Message: fmt.Sprintf("Too large resource version: %d, current: %d", from, c.rv),
				Details: &metav1.StatusDetails{
					Causes:            []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}},
					RetryAfterSeconds: 1,
				},
			}}
		}
		for _, e := range c.history {
			if e.rv <= from {
				continue
			}
			if we, ok := w.filter(e); ok {
				initial = append(initial, we)
			}
		}
	}
	c.watchers[w] = struct{}{}
	return initial, nil
}

// stream writes the initial events, then w's events, to pw as
// kube-apiserver's watch server does: each a metav1.WatchEvent whose
// object is encoded for out, encoded with the stream serializer of out's
// media type and framed by its framer (in JSON one event a line, in
// protobuf each event after its length, 4 bytes big-endian). It returns,
// closing pw and unregistering w, when ctx ends, the client closes the
// body, timeout elapses, w is dropped for falling behind, or a write
// fails.
func (c *Cluster) stream(ctx context.Context, r *resource, out output, w *watcher, pw *io.PipeWriter, closed <-chan struct{}, initial []watchEvent, timeout time.Duration) {
	// A write blocks until the client reads: end it when ctx does.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	defer func() {
		stop()
		c.mu.Lock()
		c.dropWatcher(w)
		c.mu.Unlock()
		pw.Close()
	}()
	frames := out.info.StreamSerializer.Framer.NewFrameWriter(pw)
	var buf bytes.Buffer
	write := func(e watchEvent) bool {
		obj, err := c.marshal(out, r, e.obj)
		if err == nil {
			buf.Reset()
			err = out.info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: string(e.typ), Object: runtime.RawExtension{Raw: obj}}, &buf)
			if err == nil {
				_, err = frames.Write(buf.Bytes())
			}
		}
		return err == nil
	}
	for _, e := range initial {
		if !write(e) {
			return
		}
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-closed:
			return
		case <-expired:
			return
		case e, ok := <-w.ch:
			if !ok || !write(e) {
				return
			}
		}
	}
}

// watchBody is a watch response body; Close tells the stream to stop even
// when no event is on its way.
type watchBody struct {
	*io.PipeReader
	once   sync.Once
	closed chan struct{}
}

// Close closes the body and ends the stream.
func (b *watchBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.PipeReader.Close()
}
