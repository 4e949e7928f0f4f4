package reconcile

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
)

// What ctrlkit allocates to give a Reconcile that logs nothing its
// context: the run, and the two context values (logr's boxes the logger).
// Formatting the values for the logger would cost about ten more.
func TestRunAllocations(t *testing.T) {
	log := funcr.New(func(string, string) {}, funcr.Options{}).WithValues("controller", "c")
	parent := newParentSinks(log)
	req := Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "name"}}
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		r := newRun(parent, req)
		l := r.logger(log, 0)
		_ = r.context(ctx, l)
		l.V(4).Info("Reconcile done") // not enabled: formats nothing
	})
	if n > 4 {
		t.Errorf("%v allocations per Reconcile's run, want at most 4", n)
	}
}
