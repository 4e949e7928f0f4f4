package protolist

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PageFunc answers one page of a list with opts, calling meta, if the
// answer allows it, with the page's ListMeta as soon as it is decoded
// (Hooks.Meta), before the page's items.
type PageFunc func(ctx context.Context, opts metav1.ListOptions, meta func(*metav1.ListMeta)) (runtime.Object, error)

// Pages lists with opts (a page size, no continue token) page by page
// through page, sending each page's request as soon as the page before
// has given its continue token, with at most inFlight requests out at
// once. It returns one list: the first page's, with every page's items in
// order and the last page's continue token, which is empty unless a
// page's token was only known once the page was all in (a JSON answer,
// which calls no meta); client-go's pager then asks for the rest. A page
// that fails fails the list with its error; no request outlives the call.
func Pages(ctx context.Context, opts metav1.ListOptions, inFlight int, page PageFunc) (runtime.Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		list runtime.Object
		err  error
		done chan struct{}
	}
	var (
		mu      sync.Mutex
		results []*result
		wg      sync.WaitGroup
		slots   = make(chan struct{}, inFlight)
	)
	defer wg.Wait() // after cancel: no page outlives the list
	var fetch func(metav1.ListOptions)
	fetch = func(o metav1.ListOptions) {
		r := &result{done: make(chan struct{})}
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
		wg.Go(func() {
			defer close(r.done)
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			}
			defer func() { <-slots }()
			// A page's metadata may come in parts (Decode calls meta with
			// each): the next page is asked for once, and the page must end
			// with the token it was asked for with.
			var next string
			r.list, r.err = page(ctx, o, func(m *metav1.ListMeta) {
				if m.Continue != "" && next == "" {
					next = m.Continue
					more := o
					more.Continue = next
					fetch(more)
				}
			})
			if r.err == nil && next != "" {
				if lm, err := meta.ListAccessor(r.list); err != nil {
					r.err = err
				} else if lm.GetContinue() != next {
					r.err = fmt.Errorf("a page's continue token changed from %q to %q while it was read", next, lm.GetContinue())
				}
			}
		})
	}
	fetch(opts)
	var items []runtime.Object
	var first, last runtime.Object
	for i := 0; ; i++ {
		mu.Lock()
		if i == len(results) {
			mu.Unlock()
			break
		}
		r := results[i]
		mu.Unlock()
		<-r.done
		if r.err != nil {
			return nil, r.err
		}
		got, err := meta.ExtractListWithAlloc(r.list)
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
		if first == nil {
			first = r.list
		}
		last = r.list
	}
	if last == first {
		return first, nil
	}
	// Merged as client-go's pager merges pages: the last page's token is
	// the list's.
	lm, err := meta.ListAccessor(last)
	if err != nil {
		return nil, err
	}
	fm, err := meta.ListAccessor(first)
	if err != nil {
		return nil, err
	}
	fm.SetContinue(lm.GetContinue())
	if err := meta.SetList(first, items); err != nil {
		return nil, err
	}
	return first, nil
}
