package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNewProjectE2E proves that a generated project works: it runs
// `ctrlkit new` against this checkout (--ctrlkit-replace), then the new
// project's `make test` (its unit tests and its e2e test under envtest),
// `make lint`, and `make generate`, which must leave every file as ctrlkit
// new wrote it.
//
// It needs KUBEBUILDER_ASSETS, the network or a warm module cache (go.sum
// is filled with GOFLAGS=-mod=mod; make generate builds controller-gen),
// and several minutes on a cold build cache, so it is skipped without
// KUBEBUILDER_ASSETS and in -short mode. Run it with
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go test -count=1 -timeout 30m -run '^TestNewProjectE2E$' ./cmd/ctrlkit/
func TestNewProjectE2E(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" || testing.Short() {
		t.Skip("needs KUBEBUILDER_ASSETS (and no -short): it runs the generated project's envtest e2e test")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("needs make")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "memcached-operator")

	start := time.Now()
	code, stdout, stderr := ctrlkitNew(append(slices.Clone(memcached), "--ctrlkit-replace", root, dir)...)
	if code != 0 {
		t.Fatalf("ctrlkit new: status %d\n%s%s", code, stdout, stderr)
	}
	newTook := time.Since(start)

	env := append(os.Environ(),
		"KUBEBUILDER_ASSETS="+assets,
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"),
		"GOWORK=off",
	)
	makeTarget := func(target string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "make", target)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("make %s in the generated project failed after %v: %v\n%s", target, took.Round(time.Second), err, out)
		}
		t.Logf("make %s: %v", target, took.Round(100*time.Millisecond))
		return took
	}

	testTook := makeTarget("test")
	t.Logf("ctrlkit new: %v; then first make test: %v; together %v",
		newTook.Round(time.Millisecond), testTook.Round(100*time.Millisecond), (newTook + testTook).Round(100*time.Millisecond))
	makeTarget("lint")

	// go.mod and go.sum are left out: -mod=mod has filled them in.
	before := snapshot(t, dir)
	makeTarget("generate")
	after := snapshot(t, dir)
	for name, data := range after {
		if old, ok := before[name]; !ok {
			t.Errorf("make generate wrote a new file %s", name)
		} else if !bytes.Equal(old, data) {
			t.Errorf("make generate changed %s: ctrlkit new's template no longer matches controller-gen's output\n--- ctrlkit new\n%s\n--- make generate\n%s", name, old, data)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("make generate removed %s", name)
		}
	}
}

// snapshot reads every file under dir except go.mod, go.sum and bin/.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte)
	for _, f := range listFiles(t, dir) {
		if f == "go.mod" || f == "go.sum" || strings.HasPrefix(f, "bin/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
	}
	return files
}
