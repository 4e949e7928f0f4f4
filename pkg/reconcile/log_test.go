package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Lines from a Reconcile's logger, and from loggers derived from it, carry
// the controller's and the Reconcile's values, keep the level of
// Options.Logger, and name the Reconcile's line as their caller.
func TestReconcileLoggerLines(t *testing.T) {
	lines, log := newJSONLines(t, funcr.Options{LogCaller: funcr.All, Verbosity: 1})

	ids := make(chan types.UID, 1)
	c, err := reconcile.New("lines", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		l := logr.FromContextOrDiscard(ctx)
		var wg sync.WaitGroup
		for range 4 { // one logger, used at once from several goroutines
			wg.Go(func() { l.Info("concurrent") })
		}
		wg.Wait()
		l.Info("plain", "k", 1)
		l.Error(errors.New("boom"), "failed")
		l.V(1).Info("too verbose") // Options.Logger is V(1): level 2 > 1
		l.WithValues("extra", "x").Info("with values")
		l.WithName("sub").Info("named")
		l.WithCallDepth(0).Info("depth")
		ids <- reconcile.IDFromContext(ctx)
		return reconcile.Result{}, nil
	}), reconcile.Options{Logger: log.V(1)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	c.Enqueue(req("ns-a", "obj-a"))
	id := receive(t, ids, "the reconcile")

	entries := lines.all()
	got := map[string]int{}
	for _, e := range entries {
		msg, _ := e["msg"].(string)
		switch msg {
		case "concurrent", "plain", "failed", "with values", "named", "depth", "too verbose":
		default:
			continue // the controller's own lines
		}
		got[msg]++
		for k, want := range map[string]any{"controller": "lines", "namespace": "ns-a", "name": "obj-a", "reconcileID": string(id)} {
			if e[k] != want {
				t.Errorf("%q: %s = %v, want %v (line %v)", msg, k, e[k], want, e)
			}
		}
		caller, _ := e["caller"].(map[string]any)
		if file, _ := caller["file"].(string); filepath.Base(file) != "log_test.go" {
			t.Errorf("%q: caller %v, want this file's line", msg, caller)
		}
		if msg != "failed" && e["level"] != float64(1) {
			t.Errorf("%q: level = %v, want 1 (Options.Logger's)", msg, e["level"])
		}
	}
	want := map[string]int{"concurrent": 4, "plain": 1, "failed": 1, "with values": 1, "named": 1, "depth": 1}
	for msg, n := range want {
		if got[msg] != n {
			t.Errorf("%q: %d lines, want %d (all: %v)", msg, got[msg], n, got)
		}
	}
	if got["too verbose"] != 0 {
		t.Errorf("a line above the sink's verbosity was written")
	}
	for _, e := range entries {
		if e["msg"] == "with values" && e["extra"] != "x" {
			t.Errorf("derived logger lost its value: %v", e)
		}
		if e["msg"] == "named" && e["logger"] != "sub" {
			t.Errorf("named logger: logger = %v, want sub", e["logger"])
		}
	}
}

// Every Reconcile gets its own reconcileID, a version 4 UUID, the same
// each time it is asked for, and a logger in its context, whether or not
// the controller logs.
func TestReconcileIDs(t *testing.T) {
	uuidV4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, tc := range []struct {
		name string
		log  logr.Logger
	}{{"discarding logger", logr.Discard()}, {"logger", funcr.New(func(string, string) {}, funcr.Options{})}} {
		t.Run(tc.name, func(t *testing.T) {
			ids := make(chan types.UID, 1)
			c, err := reconcile.New("ids", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
				id := reconcile.IDFromContext(ctx)
				if again := reconcile.IDFromContext(ctx); again != id {
					t.Errorf("IDFromContext changed within a Reconcile: %q, then %q", id, again)
				}
				if _, err := logr.FromContext(ctx); err != nil {
					t.Errorf("no logger in a Reconcile's context: %v", err)
				}
				ids <- id
				return reconcile.Result{}, nil
			}), reconcile.Options{Logger: tc.log})
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)
			seen := map[types.UID]bool{}
			for i := range 20 {
				c.Enqueue(req("ns", fmt.Sprint("obj-", i)))
				id := receive(t, ids, "a reconcile")
				if !uuidV4.MatchString(string(id)) {
					t.Errorf("reconcileID %q is not a version 4 UUID", id)
				}
				if seen[id] {
					t.Errorf("reconcileID %q given twice", id)
				}
				seen[id] = true
			}
		})
	}
	if id := reconcile.IDFromContext(context.Background()); id != "" {
		t.Errorf("IDFromContext outside a Reconcile = %q, want empty", id)
	}
}
