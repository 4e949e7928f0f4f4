package informer

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// NamespaceIndexes reports, for the informer of each namespace i caches
// ("" for all), whether its indexer has client-go's namespace index.
func NamespaceIndexes[T runtime.Object](i *Informer[T]) map[string]bool {
	out := map[string]bool{}
	for _, p := range i.current() {
		_, out[p.scope.namespace] = p.inf.GetIndexer().GetIndexers()[cache.NamespaceIndex]
	}
	return out
}

// Waiting reports, summed over i's informers, AwaitWrite's count of
// waiters and the waiters registered.
func Waiting[T runtime.Object](i *Informer[T]) (waiting int32, registered int) {
	for _, p := range i.current() {
		tr := &p.writes
		tr.mu.Lock()
		waiting += tr.waiting.Load()
		registered += len(tr.waiters)
		tr.mu.Unlock()
	}
	return waiting, registered
}
