package docs_test

// TestBook checks the book (docs/*.md) and the landing page (README.md) the
// way a reader would use them: every code block of theirs is compiled, and
// every one of docs/ is run. The conventions a page follows:
//
//   - Every ```go block is one whole Go source file, package clause and
//     imports included, gofmt-clean. Its first line may name it,
//     "// file: NAME.go" or "// file: NAME_test.go"; otherwise it is
//     block<N>.go, N counting the page's go blocks from 1.
//   - The go blocks of one page form one package. The test writes them to a
//     fresh directory under docs/.book (ignored by ./... and by git, removed
//     afterwards), inside the root module, so that their imports resolve
//     against the root go.mod, with GOWORK=off as in make unit.
//   - The test runs go vet on the package, then runs it: its main, which
//     must exit 0 within runDeadline, if it is package main, and go test if
//     it has _test.go files. A page with go blocks that have neither a main
//     nor a test fails: every block of docs/ is run. Blocks run against
//     pkg/fake, never a cluster.
//   - ```yaml blocks are split into documents on lines "---" and each must
//     decode. ```sh, ```console and ```bash blocks are counted, not run.
//     Blocks of any other language (or none) are counted, not checked.
//   - README.md's go blocks form one package too, checked with go vet only:
//     its operator needs a cluster, so it is compiled, not run.
//   - README.md has at most readmeMaxLines lines, and every relative link
//     of README.md and docs/*.md names a file or directory that exists.
//
// The test logs one line with the blocks it counted (go test -v).

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
)

const (
	// readmeMaxLines is the most lines README.md may have.
	readmeMaxLines = 200
	// runDeadline bounds the run of one page's main or tests.
	runDeadline = 2 * time.Minute
	// buildDeadline bounds go vet and go build of one page.
	buildDeadline = 5 * time.Minute
	// bookDir holds the pages' packages while the test runs.
	bookDir = ".book"
	// readme is the landing page, from docs/.
	readme = "../README.md"
)

// block is one fenced code block of a page.
type block struct {
	lang string // the fence's first word, lower case: go, yaml, sh...
	text string // the lines between the fences
	line int    // the line of the opening fence, from 1
}

// page is one Markdown file and its code blocks.
type page struct {
	path   string // relative to docs/
	text   string
	blocks []block
}

// kind is how the test treats a block's language.
func kind(lang string) string {
	switch lang {
	case "go":
		return "go"
	case "yaml", "yml":
		return "yaml"
	case "sh", "console", "bash", "shell":
		return "sh"
	}
	return "other"
}

// parsePage reads path and splits out its fenced code blocks. An opening
// fence is a line of three or more backticks (after any indentation) and
// an info string; the block ends at a line of backticks alone, at least as
// many. Indentation of the opening fence is removed from the block's lines.
func parsePage(t *testing.T, path string) page {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := page{path: path, text: string(data)}
	lines := strings.Split(p.text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		indent := len(lines[i]) - len(trimmed)
		fence := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
		if fence < 3 {
			continue
		}
		info := strings.Fields(trimmed[fence:])
		b := block{line: i + 1}
		if len(info) > 0 {
			b.lang = strings.ToLower(info[0])
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimLeft(lines[i], " ")
			if strings.Trim(l, "`") == "" && len(l) >= fence {
				closed = true
				break
			}
			cut := min(indent, len(lines[i])-len(l))
			body = append(body, lines[i][cut:])
		}
		if !closed {
			t.Errorf("%s:%d: code block never closed", path, b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		p.blocks = append(p.blocks, b)
	}
	return p
}

// counts adds up the blocks the test saw and what it did with them.
type counts struct {
	mu                          sync.Mutex
	blocks, goBlocks, goRun     int
	yamlBlocks, shBlocks, other int
}

// TestBook checks every page of docs/ and README.md; see the comment at the
// top of this file.
func TestBook(t *testing.T) {
	paths, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no pages in docs/")
	}
	var pages []page
	for _, p := range paths {
		pages = append(pages, parsePage(t, p))
	}
	front := parsePage(t, readme)

	// The landing page's length and every page's links.
	if n := strings.Count(strings.TrimSuffix(front.text, "\n"), "\n") + 1; n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the rest into the book", n, readmeMaxLines)
	}
	for _, p := range append([]page{front}, pages...) {
		checkLinks(t, p)
	}

	if err := os.MkdirAll(bookDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(bookDir) }) // only if no other run uses it

	var c counts
	t.Run("pages", func(t *testing.T) {
		for _, p := range pages {
			t.Run(strings.TrimSuffix(p.path, ".md"), func(t *testing.T) {
				t.Parallel()
				checkPage(t, p, true, &c)
			})
		}
		t.Run("README", func(t *testing.T) {
			t.Parallel()
			var rc counts
			checkPage(t, front, false, &rc)
			var sh, other int
			for _, b := range front.blocks {
				switch kind(b.lang) {
				case "sh":
					sh++
				case "other":
					other++
				}
			}
			t.Logf("README.md: %d code blocks: %d go (compiled with go vet, not run: it needs a cluster), %d yaml (parsed), %d sh (not run), %d other (not checked)",
				rc.blocks, rc.goBlocks, rc.yamlBlocks, sh, other)
		})
	})
	t.Logf("book: %d pages, %d code blocks: %d go (%d compiled, %d run), %d yaml (%d parsed), %d sh (not run), %d other (not checked)",
		len(pages), c.blocks, c.goBlocks, c.goBlocks, c.goRun, c.yamlBlocks, c.yamlBlocks, c.shBlocks, c.other)
}

// checkPage checks the yaml blocks of p, then writes its go blocks into a
// package, vets it and, if run, runs it.
func checkPage(t *testing.T, p page, run bool, c *counts) {
	var files []string // names, in order
	sources := map[string]string{}
	var yamls, shs, others int
	for _, b := range p.blocks {
		switch kind(b.lang) {
		case "go":
			name := fmt.Sprintf("block%d.go", len(files)+1)
			if first, _, _ := strings.Cut(b.text, "\n"); strings.HasPrefix(first, "// file: ") {
				name = strings.TrimSpace(strings.TrimPrefix(first, "// file: "))
				if !regexp.MustCompile(`^[a-z0-9_]+\.go$`).MatchString(name) {
					t.Errorf("%s:%d: file name %q is not NAME.go or NAME_test.go", p.path, b.line, name)
					continue
				}
			}
			if _, dup := sources[name]; dup {
				t.Errorf("%s:%d: a second block named %s", p.path, b.line, name)
				continue
			}
			if formatted, err := format.Source([]byte(b.text)); err != nil {
				t.Errorf("%s:%d: not Go source: %v", p.path, b.line, err)
			} else if !bytes.Equal(formatted, []byte(b.text)) {
				t.Errorf("%s:%d: not gofmt-clean; gofmt gives:\n%s", p.path, b.line, formatted)
			}
			files = append(files, name)
			sources[name] = b.text
		case "yaml":
			yamls++
			for i, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(b.text, -1) {
				var v any
				if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
					t.Errorf("%s:%d: yaml document %d does not decode: %v", p.path, b.line, i+1, err)
				}
			}
		case "sh":
			shs++
		default:
			others++
		}
	}
	c.mu.Lock()
	c.blocks += len(p.blocks)
	c.goBlocks += len(files)
	c.yamlBlocks += yamls
	c.shBlocks += shs
	c.other += others
	c.mu.Unlock()
	if len(files) == 0 || t.Failed() {
		return
	}

	dir, err := os.MkdirTemp(bookDir, strings.TrimSuffix(filepath.Base(p.path), ".md")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	hasMain, hasTests := false, false
	fset := token.NewFileSet()
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(sources[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "_test.go") {
			hasTests = true
			continue
		}
		f, err := parser.ParseFile(fset, name, sources[name], parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %s: %v", p.path, name, err)
		}
		if f.Name.Name == "main" && slices.ContainsFunc(f.Decls, func(d ast.Decl) bool {
			fn, ok := d.(*ast.FuncDecl)
			return ok && fn.Recv == nil && fn.Name.Name == "main"
		}) {
			hasMain = true
		}
	}

	goCmd(t, p, dir, buildDeadline, "vet", ".")
	if !run || t.Failed() {
		return
	}
	if !hasMain && !hasTests {
		t.Fatalf("%s: its go blocks have neither a func main nor a _test.go file, so nothing of them runs", p.path)
	}
	if hasMain {
		goCmd(t, p, dir, buildDeadline, "build", "-o", "page.bin", ".")
		if !t.Failed() {
			ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
			defer cancel()
			cmd := exec.CommandContext(ctx, "./page.bin")
			cmd.Dir = dir
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: its main failed (deadline %v): %v\n%s", p.path, runDeadline, err, out)
			}
		}
	}
	if hasTests {
		goCmd(t, p, dir, buildDeadline+runDeadline, "test", "-count=1", ".")
	}
	if !t.Failed() {
		c.mu.Lock()
		c.goRun += len(files)
		c.mu.Unlock()
	}
}

// goCmd runs the go command with args in dir, with GOWORK=off, and fails
// the test with its output if it fails or outlasts d.
func goCmd(t *testing.T, p page, dir string, d time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: go %s: %v\n%s", p.path, strings.Join(args, " "), err, out)
	}
}

var (
	// link is a Markdown inline link or image; group 1 is its target.
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is inline code, whose brackets are no links.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
)

// checkLinks fails the test for every relative link of p, outside code
// blocks and code spans, whose file or directory does not exist.
func checkLinks(t *testing.T, p page) {
	t.Helper()
	inBlock := false
	for i, line := range strings.Split(p.text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(p.path), target)); err != nil {
				t.Errorf("%s:%d: link to %s: %v", p.path, i+1, m[1], err)
			}
		}
	}
}
