package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNewProjectE2E proves that generated projects work, for each
// template (the deployment one with the webhooks): it runs `ctrlkit new`
// against this checkout (--ctrlkit-replace), then in the new project
//   - `make test`: its unit tests, and its e2e tests under envtest, which
//     run the operator as its ServiceAccount with leader election, scrape
//     its HTTPS /metrics with and without the metrics-reader role, apply
//     every manifest under config/ with a server-side dry run, and admit
//     the Deployment in a namespace that enforces the restricted Pod
//     Security Standard (and the webhook e2e test, with --webhook);
//   - config_test.go's RBAC test against broadened roles, which it must
//     refuse;
//   - `make lint`;
//   - `make generate manifests`, which must leave every file as ctrlkit
//     new wrote it;
//   - `make test-installer`, which renders config/default with kustomize
//     into dist/install.yaml and dry-run applies every object of it;
//   - the go build line of its Dockerfile, flags and environment parsed
//     from it, and checks the binary is statically linked and stripped.
//
// It needs KUBEBUILDER_ASSETS, the network or a warm module cache (go.sum
// is filled with GOFLAGS=-mod=mod; the Makefile builds controller-gen and
// kustomize with go run), and several minutes on a cold build cache, so
// it is skipped without KUBEBUILDER_ASSETS and in -short mode. Run it with
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go test -count=1 -timeout 30m -run '^TestNewProjectE2E$' ./cmd/ctrlkit/
func TestNewProjectE2E(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" || testing.Short() {
		t.Skip("needs KUBEBUILDER_ASSETS (and no -short): it runs the generated projects' envtest e2e tests")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("needs make")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"KUBEBUILDER_ASSETS="+assets,
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"),
		"GOWORK=off",
	)
	for _, tc := range []struct {
		name      string
		flags     []string
		wantTests []string // in test/e2e, all run by make test
	}{
		{"memcached-operator", memcached, []string{"TestMemcached", "TestSecureMetrics", "TestManifests", "TestRestrictedPodSecurity", "TestWebhooks"}},
		{"guestbook-operator", guestbook, []string{"TestGuestbook", "TestSecureMetrics", "TestManifests", "TestRestrictedPodSecurity"}},
		{"configmap-operator", configmaps, []string{"TestConfigMap", "TestSecureMetrics", "TestManifests", "TestRestrictedPodSecurity"}},
		{"deployment-operator", deployments, []string{"TestDeployment", "TestSecureMetrics", "TestManifests", "TestRestrictedPodSecurity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.name)
			start := time.Now()
			code, stdout, stderr := ctrlkitNew(append(slices.Clone(tc.flags), "--ctrlkit-replace", root, dir)...)
			if code != 0 {
				t.Fatalf("ctrlkit new: status %d\n%s%s", code, stdout, stderr)
			}
			newTook := time.Since(start)
			checkProject(t, dir, env, newTook, tc.wantTests)
		})
	}
}

// checkProject runs the checks of TestNewProjectE2E in the project in dir.
func checkProject(t *testing.T, dir string, env []string, newTook time.Duration, wantTests []string) {
	run := func(name string, args ...string) ([]byte, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s %s in the generated project failed after %v: %v\n%s", name, strings.Join(args, " "), took.Round(time.Second), err, out)
		}
		t.Logf("%s %s: %v", name, strings.Join(args, " "), took.Round(100*time.Millisecond))
		return out, took
	}

	_, testTook := run("make", "test")
	t.Logf("ctrlkit new: %v; then first make test: %v; together %v",
		newTook.Round(time.Millisecond), testTook.Round(100*time.Millisecond), (newTook + testTook).Round(100*time.Millisecond))
	// make test ran every test of test/e2e; these must be among them.
	var e2e []byte
	for _, f := range listFiles(t, filepath.Join(dir, "test", "e2e")) {
		e2e = append(e2e, mustRead(t, filepath.Join(dir, "test", "e2e", f))...)
	}
	for _, want := range wantTests {
		if !bytes.Contains(e2e, []byte("\nfunc "+want+"(t *testing.T) {\n")) {
			t.Errorf("test/e2e has no %s", want)
		}
	}
	checkRBACTestFails(t, dir, env)
	run("make", "lint")

	// go.mod and go.sum are left out: -mod=mod has filled them in.
	before := snapshot(t, dir)
	run("make", "generate", "manifests")
	after := snapshot(t, dir)
	for name, data := range after {
		if old, ok := before[name]; !ok {
			t.Errorf("make generate manifests wrote a new file %s", name)
		} else if !bytes.Equal(old, data) {
			t.Errorf("make generate manifests changed %s: ctrlkit new's template no longer matches controller-gen's output\n--- ctrlkit new\n%s\n--- make generate manifests\n%s", name, old, data)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("make generate manifests removed %s", name)
		}
	}

	const img = "registry.example.com/operator:v1.2.3"
	run("make", "test-installer", "IMG="+img)
	install := string(mustRead(t, filepath.Join(dir, "dist", "install.yaml")))
	if !strings.Contains(install, "image: "+img+"\n") {
		t.Errorf("dist/install.yaml does not run image %s", img)
	}

	binary := buildAsDockerfile(t, dir, env)
	problems, err := staticProblems(binary, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("the binary the Dockerfile builds has %s", p)
	}
	// The binary knows every flag the Deployment passes it: with -h last,
	// it prints its usage and exits 0 only if all the flags before parse.
	if runtime.GOOS != "linux" {
		return // the binary is for Linux
	}
	args := deploymentManager(t, filepath.Join(dir, "config", "manager", "manager.yaml")).args
	if len(args) == 0 {
		t.Fatal("config/manager/manager.yaml: the Deployment's manager container has no args")
	}
	if out, err := exec.CommandContext(t.Context(), binary, append(args, "-h")...).CombinedOutput(); err != nil {
		t.Errorf("%s %s -h: %v: the Deployment passes a flag main.go does not define\n%s", binary, strings.Join(args, " "), err, out)
	}
}

// checkRBACTestFails broadens config/rbac/role.yaml in the project in dir
// in ways the operator does not need, runs the project's
// TestRBACGrantsWhatTheOperatorUses against each, which must fail saying
// so, and restores the file.
func checkRBACTestFails(t *testing.T, dir string, env []string) {
	t.Helper()
	file := filepath.Join(dir, "config", "rbac", "role.yaml")
	orig := mustRead(t, file)
	t.Cleanup(func() {
		if err := os.WriteFile(file, orig, 0o644); err != nil {
			t.Error(err)
		}
	})
	// The ClusterRole comes first (role.yaml is controller-gen's).
	broadened := map[string]string{
		"a rule for Secrets in every namespace": strings.Replace(string(orig), "\nrules:\n", "\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n", 1),
		"a wildcard verb":                       strings.Replace(string(orig), "  verbs:\n", "  verbs:\n  - '*'\n", 1),
	}
	for _, name := range []string{"validating", "mutating", "webhook-certs"} {
		names := "  resourceNames:\n  - " + filepath.Base(dir) + "-" + name + "\n"
		if strings.Contains(string(orig), names) {
			broadened["a rule without resourceNames "+name] = strings.Replace(string(orig), names, "", 1)
		}
	}
	for what, data := range broadened {
		if data == string(orig) {
			t.Fatalf("%s: role.yaml did not change: this test no longer knows its layout", what)
		}
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), "go", "test", "-count=1", "-run", "^TestRBACGrantsWhatTheOperatorUses$", ".")
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("what it does not use")) {
			t.Errorf("with %s in config/rbac/role.yaml, TestRBACGrantsWhatTheOperatorUses: err = %v, want a failure saying the operator does not use it\n%s", what, err, out)
		}
	}
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot reads every file under dir except go.mod, go.sum, bin/ and
// dist/.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte)
	for _, f := range listFiles(t, dir) {
		if f == "go.mod" || f == "go.sum" || strings.HasPrefix(f, "bin/") || strings.HasPrefix(f, "dist/") {
			continue
		}
		files[f] = mustRead(t, filepath.Join(dir, filepath.FromSlash(f)))
	}
	return files
}
