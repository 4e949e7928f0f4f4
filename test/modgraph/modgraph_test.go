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

// direct are the modules ctrlkit's go.mod may require directly: what
// library code imports, and goleak for its tests. Everything else in a
// consumer's graph must come through these.
var direct = []string{
	"github.com/go-logr/logr",
	"github.com/prometheus/client_golang",
	"github.com/prometheus/client_model",
	"github.com/prometheus/common",
	"go.uber.org/goleak",
	"golang.org/x/time",
	"k8s.io/api",
	"k8s.io/apimachinery",
	"k8s.io/client-go",
	"k8s.io/klog/v2",
	"k8s.io/kube-openapi",
	"k8s.io/utils",
	"sigs.k8s.io/structured-merge-diff/v6",
}

// TestConsumerGraph builds a throwaway module that imports every package
// under pkg/, with a replace to this checkout, and checks its module graph.
//
// golang.org/x/mod is special: golang.org/x/text and k8s.io/kube-openapi,
// which client-go needs, list it in their go.mod, so `go list -m all`
// shows it for every client-go user whatever ctrlkit does. It is checked
// where ctrlkit could bring it: as a requirement of ctrlkit's go.mod, and
// as a package in the consumer's build. The other forbidden modules must
// not appear in the graph at all.
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
	graph := strings.Split(goCmd(t, dir, "mod", "graph"), "\n")
	for _, m := range forbidden[:2] {
		if slices.Contains(all, m) {
			var via []string
			for _, line := range graph {
				if strings.Contains(line, " "+m+"@") {
					via = append(via, line)
				}
			}
			t.Errorf("a module importing ctrlkit's pkg/... gets %s in its module graph, required by:\n\t%s\nmove what needs it out of the root go.mod (docs/modules.md)",
				m, strings.Join(via, "\n\t"))
		}
	}

	// ctrlkit's own requirements, as the consumer's module graph sees them.
	for _, line := range graph {
		from, to, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(from, library+"@") {
			continue
		}
		mod, _, _ := strings.Cut(to, "@")
		if slices.Contains(forbidden, mod) {
			t.Errorf("ctrlkit's go.mod requires %s: move what needs it into a module of its own (docs/modules.md)", to)
		}
	}
	mods := strings.Fields(goCmd(t, root, "list", "-m", "-f", "{{if not .Indirect}}{{.Path}}{{end}}", "all"))
	for _, m := range mods[1:] { // mods[0] is ctrlkit itself
		if !slices.Contains(direct, m) {
			t.Errorf("ctrlkit's go.mod requires %s directly: library code may use only the modules in direct (modgraph_test.go); if it must, add it there and say why in docs/modules.md", m)
		}
	}

	// The packages the consumer builds.
	for _, p := range strings.Fields(goCmd(t, dir, "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")) {
		if slices.Contains(forbidden, p) {
			t.Errorf("a module importing ctrlkit's pkg/... builds packages of %s", p)
		}
	}
	t.Logf("a consumer of %d packages gets %d modules in its graph; ctrlkit requires %d directly", len(pkgs), len(all), len(mods)-1)
}

// TestExamplesStandalone copies the examples module out of the repository,
// as a user starting from an example would, points its replace at this
// checkout (until a release is published, that is how one depends on
// ctrlkit), and builds and vets it outside the workspace.
func TestExamplesStandalone(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "examples")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	goCmd(t, dir, "mod", "edit", "-replace", library+"="+root)
	// -mod=readonly: the copied go.mod and go.sum must be complete as they are.
	goCmd(t, dir, "build", "-mod=readonly", "-o", os.DevNull, "./...")
	goCmd(t, dir, "vet", "-mod=readonly", "./...")
}

// goCmd runs the go command in dir outside any workspace, as a user's
// module would, and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
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
