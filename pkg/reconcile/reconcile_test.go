package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

var errBoom = errors.New("boom")

func TestTerminalError(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantTerminal bool
		wantIs       error // errors.Is(err, wantIs) must hold
		wantMsg      string
	}{
		{name: "nil", err: nil, wantTerminal: false},
		{name: "plain error", err: errBoom, wantTerminal: false, wantIs: errBoom, wantMsg: "boom"},
		{name: "terminal", err: reconcile.TerminalError(errBoom), wantTerminal: true, wantIs: errBoom, wantMsg: "terminal error: boom"},
		{name: "terminal wrapped by caller", err: fmt.Errorf("sync: %w", reconcile.TerminalError(errBoom)), wantTerminal: true, wantIs: errBoom, wantMsg: "sync: terminal error: boom"},
		{name: "terminal of a wrapped error", err: reconcile.TerminalError(fmt.Errorf("validate: %w", errBoom)), wantTerminal: true, wantIs: errBoom, wantMsg: "terminal error: validate: boom"},
		{name: "terminal in a join", err: errors.Join(errBoom, reconcile.TerminalError(errors.New("other"))), wantTerminal: true, wantIs: errBoom},
		{name: "terminal of nil", err: reconcile.TerminalError(nil), wantTerminal: true, wantMsg: "terminal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reconcile.IsTerminal(tt.err); got != tt.wantTerminal {
				t.Errorf("IsTerminal(%v) = %v, want %v", tt.err, got, tt.wantTerminal)
			}
			if tt.wantIs != nil && !errors.Is(tt.err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false, want true", tt.err, tt.wantIs)
			}
			if tt.wantMsg != "" && tt.err.Error() != tt.wantMsg {
				t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestTerminalErrorUnwrap(t *testing.T) {
	err := reconcile.TerminalError(errBoom)
	if got := errors.Unwrap(err); got != errBoom {
		t.Errorf("errors.Unwrap(TerminalError(errBoom)) = %v, want errBoom", got)
	}
}

func TestResultIsZero(t *testing.T) {
	tests := []struct {
		name string
		res  reconcile.Result
		want bool
	}{
		{name: "zero", res: reconcile.Result{}, want: true},
		{name: "requeue after", res: reconcile.Result{RequeueAfter: time.Second}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.res.IsZero(); got != tt.want {
				t.Errorf("%+v.IsZero() = %v, want %v", tt.res, got, tt.want)
			}
		})
	}
}

func TestFunc(t *testing.T) {
	want := req("ns", "obj")
	var got reconcile.Request
	f := reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		got = r
		return reconcile.Result{RequeueAfter: time.Minute}, errBoom
	})
	res, err := f.Reconcile(t.Context(), want)
	if got != want {
		t.Errorf("Func received %v, want %v", got, want)
	}
	if res.RequeueAfter != time.Minute || err != errBoom {
		t.Errorf("Func returned (%+v, %v), want ({RequeueAfter:1m}, boom)", res, err)
	}
}

func TestNewValidation(t *testing.T) {
	ok := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	tests := []struct {
		name     string
		ctrlName string
		r        reconcile.Reconciler
		opts     reconcile.Options
		wantErr  string // substring; "" means no error
	}{
		{name: "zero options", ctrlName: "c", r: ok},
		{name: "all set", ctrlName: "c", r: ok, opts: reconcile.Options{Workers: 3, Timeout: time.Second, ShutdownTimeout: time.Second, AbortTimeout: time.Second}},
		{name: "empty name", ctrlName: "", r: ok, wantErr: "name is empty"},
		{name: "nil reconciler", ctrlName: "c", r: nil, wantErr: "Reconciler is nil"},
		{name: "negative workers", ctrlName: "c", r: ok, opts: reconcile.Options{Workers: -1}, wantErr: "Options.Workers"},
		{name: "negative timeout", ctrlName: "c", r: ok, opts: reconcile.Options{Timeout: -time.Second}, wantErr: "Options.Timeout"},
		{name: "negative abort timeout", ctrlName: "c", r: ok, opts: reconcile.Options{AbortTimeout: -time.Second}, wantErr: "Options.AbortTimeout"},
		{name: "negative shutdown timeout", ctrlName: "c", r: ok, opts: reconcile.Options{ShutdownTimeout: -time.Second}, wantErr: "Options.ShutdownTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := reconcile.New(tt.ctrlName, tt.r, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.Name() != tt.ctrlName {
					t.Errorf("Name() = %q, want %q", c.Name(), tt.ctrlName)
				}
				if c.Queue() == nil {
					t.Error("Queue() = nil")
				}
				c.Queue().ShutDown() // never started: release the queue's goroutines
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want an error mentioning %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error %q does not mention %q", err, tt.wantErr)
			}
			if c != nil {
				t.Errorf("New returned a Controller with an error")
			}
		})
	}
}

func TestIDFromContextOutsideReconcile(t *testing.T) {
	if id := reconcile.IDFromContext(t.Context()); id != "" {
		t.Errorf("IDFromContext outside a Reconcile = %q, want empty", id)
	}
}
