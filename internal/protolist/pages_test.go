package protolist

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// pagesInFlight is the bound the tests give Pages.
const pagesInFlight = 3

// fakePages serves a list of n ConfigMaps in pages of opts.Limit, the way
// kube-apiserver does: each page's continue token is the index of its
// next item, given through meta before the page is done (unless json).
type fakePages struct {
	n    int
	json bool // tokens only come with the whole page, as a JSON answer's
	fail int  // the page starting at this item fails; -1 for none

	mu               sync.Mutex
	inFlight, most   int
	requests         []metav1.ListOptions
	release          chan struct{} // when not nil, each page waits on it after its metadata
	started, stopped atomic.Int64
}

func (f *fakePages) page(ctx context.Context, opts metav1.ListOptions, meta func(*metav1.ListMeta)) (runtime.Object, error) {
	f.started.Add(1)
	defer f.stopped.Add(1)
	f.mu.Lock()
	f.requests = append(f.requests, opts)
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	if from == f.fail {
		return nil, fmt.Errorf("page at %d failed", from)
	}
	to := min(f.n, from+int(opts.Limit))
	l := &List{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	if to < f.n {
		l.Continue = strconv.Itoa(to)
	}
	if meta != nil && !f.json {
		meta(&l.ListMeta)
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for i := from; i < to; i++ {
		l.Items = append(l.Items, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: strconv.Itoa(i)}})
	}
	return l, nil
}

func pageNames(t *testing.T, obj runtime.Object) []string {
	t.Helper()
	var out []string
	for _, o := range obj.(*List).Items {
		out = append(out, o.(*corev1.ConfigMap).Name)
	}
	return out
}

// TestPages: the pages of a list come back as one list, in order,
// at most pagesInFlight requests out at once, each next page asked for
// with the token the page before gave.
func TestPages(t *testing.T) {
	f := &fakePages{n: 23, fail: -1, release: make(chan struct{})}
	go func() {
		// Let the pages finish only once as many as may be are out.
		for {
			f.mu.Lock()
			in := f.inFlight
			f.mu.Unlock()
			if in == pagesInFlight || f.started.Load() == 5 {
				close(f.release)
				return
			}
			goruntime.Gosched()
		}
	}()
	l, err := Pages(t.Context(), metav1.ListOptions{Limit: 5, LabelSelector: "a=b"}, pagesInFlight, f.page)
	if err != nil {
		t.Fatal(err)
	}
	got := pageNames(t, l)
	if len(got) != 23 {
		t.Fatalf("%d items, want 23: %v", len(got), got)
	}
	for i, n := range got {
		if n != strconv.Itoa(i) {
			t.Fatalf("item %d is %s: %v", i, n, got)
		}
	}
	if c := l.(*List).Continue; c != "" {
		t.Errorf("continue %q, want none", c)
	}
	if len(f.requests) != 5 || f.most != pagesInFlight {
		t.Errorf("%d requests, at most %d at once; want 5 and %d", len(f.requests), f.most, pagesInFlight)
	}
	for _, r := range f.requests {
		if r.Limit != 5 || r.LabelSelector != "a=b" {
			t.Errorf("a page was asked for with %+v", r)
		}
	}
}

// TestPagesTokenAtTheEnd: when a page's token only comes with the
// whole page (a JSON answer), the list returned so far carries it, for
// client-go's pager to ask for the rest.
func TestPagesTokenAtTheEnd(t *testing.T) {
	f := &fakePages{n: 12, json: true, fail: -1}
	l, err := Pages(t.Context(), metav1.ListOptions{Limit: 5}, pagesInFlight, f.page)
	if err != nil {
		t.Fatal(err)
	}
	if got := pageNames(t, l); len(got) != 5 || l.(*List).Continue != "5" {
		t.Errorf("%v, continue %q; want the first 5 and continue 5", got, l.(*List).Continue)
	}
}

// TestPagesPageFails: a page that fails fails the list with its
// error, and no page request outlives the call.
func TestPagesPageFails(t *testing.T) {
	f := &fakePages{n: 40, fail: 10, release: make(chan struct{})}
	close(f.release)
	_, err := Pages(t.Context(), metav1.ListOptions{Limit: 5}, pagesInFlight, f.page)
	if err == nil || err.Error() != "page at 10 failed" {
		t.Errorf("error %v, want the failed page's", err)
	}
	if s, d := f.started.Load(), f.stopped.Load(); s != d {
		t.Errorf("%d page requests started, %d returned", s, d)
	}
	if errors.Is(err, context.Canceled) {
		t.Error("the error is the cancellation, not the page's")
	}
}
