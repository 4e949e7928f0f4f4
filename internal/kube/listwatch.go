package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListWatch is a cache.ListWatch over a client's list and watch that
// lets tweak change the options of every list and watch (to narrow them
// by a selector, say) before they are sent.
func ListWatch[L runtime.Object](tweak func(*metav1.ListOptions),
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			l, err := list(ctx, o)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}
}

// NoWatchList makes client-go's reflectors and informers list rather than
// use the WatchList stream: client-go asks the client (or ListerWatcher)
// it is built on whether it supports WatchList semantics
// (watchlist.DoesClientNotSupportWatchListSemantics). Embed it in a
// client, or pass it to cache.ToListWatcherWithWatchListSemantics.
type NoWatchList struct{}

// IsWatchListSemanticsUnSupported reports that WatchList is not to be
// used.
func (NoWatchList) IsWatchListSemanticsUnSupported() bool { return true }
