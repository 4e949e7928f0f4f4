// Package modgraph checks what a user of ctrlkit's library downloads: a
// throwaway module that imports every package under pkg/ must not pull in
// controller-runtime, the apiextensions apiserver or golang.org/x/mod. Those
// belong to the modules beside the library (docs/modules.md), and minimal
// version selection would otherwise force them, at our versions, on every
// user.
package modgraph

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const library = "github.com/ctrlkit/ctrlkit"

// forbidden are the modules a library user must never get through ctrlkit.
var forbidden = []string{
	"sigs.k8s.io/controller-runtime",
	"k8s.io/apiextensions-apiserver",
	"golang.org/x/mod",
}

func TestConsumerGraph(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := strings.Fields(goCmd(t, root, "list", "./pkg/..."))
	pkgs = slices.DeleteFunc(pkgs, func(p string) bool { return strings.Contains(p, "/internal/") })
	if len(pkgs) == 0 {
		t.Fatal("go list ./pkg/... found no packages")
	}

	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("// Package consumer imports every package of ctrlkit's library.\npackage consumer\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n")
	gomod := fmt.Sprintf("module example.com/consumer\n\ngo 1.26.0\n\nrequire %s v0.1.0\n\nreplace %s => %s\n", library, library, root)
	write(t, filepath.Join(dir, "go.mod"), gomod)
	write(t, filepath.Join(dir, "consumer.go"), src.String())

	goCmd(t, dir, "mod", "tidy")
	all := strings.Fields(goCmd(t, dir, "list", "-m", "-f", "{{.Path}}", "all"))
	for _, m := range forbidden {
		if slices.Contains(all, m) {
			t.Errorf("a module importing ctrlkit's pkg/... gets %s: move what needs it out of the root go.mod (docs/modules.md)\n%s",
				m, goCmd(t, dir, "mod", "why", "-m", m))
		}
	}
	t.Logf("a consumer of %d packages gets %d modules", len(pkgs), len(all))
}

// goCmd runs the go command in dir outside any workspace, as a user's
// module would, and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String()
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
