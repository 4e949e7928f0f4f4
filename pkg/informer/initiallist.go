package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// How an informer fills its cache. client-go v0.37's reflectors stream the
// initial state as watch events (WatchList) by default, and otherwise list
// at resourceVersion "0": whatever the API server's watch cache holds,
// which can be older than what this client saw before it restarted.
// ctrlkit's informers list at resourceVersion "" instead: a consistent
// read, which kube-apiserver serves from its watch cache once the cache
// has caught up with etcd. The informers of custom and metadata-only types
// ask for it unpaginated, in one response written by the server's
// streaming list encoder. Built-in types' informers ask for it in pages
// of 10,000 objects, each next page requested as soon as the page before
// gave its continue token, and decode each page while it is read
// (builtin.go). That is what makes this faster than WatchList, whose
// initial events are each framed, sent and decoded as one watch event: a
// list decoded only once it is all in takes about as long as WatchList
// (bench/cmd/listtime). Relists after a watch ends keep client-go's
// behaviour: at the last resourceVersion seen, or, when that
// has expired, consistent and paginated.

// listingDynamic and listingMetadata are clients whose informers list
// (kube.NoWatchList).
type (
	listingDynamic struct {
		dynamic.Interface
		kube.NoWatchList
	}
	listingMetadata struct {
		metadata.Interface
		kube.NoWatchList
	}
)

// consistentList returns tweak followed by the change that makes a
// reflector's initial list, which it sends at resourceVersion "0" with a
// page size the watch cache ignores, a consistent unpaginated one. Watches
// (AllowWatchBookmarks, which client-go's reflector always sets on them)
// and later lists are left alone.
func consistentList(tweak func(*metav1.ListOptions)) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
		if !o.Watch && !o.AllowWatchBookmarks && o.ResourceVersion == "0" {
			o.ResourceVersion = ""
			o.ResourceVersionMatch = ""
			o.Limit = 0
		}
	}
}
