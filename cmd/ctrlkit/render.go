package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// templates holds one template per generated file. Their names end in
// .tmpl so that Go tooling never mistakes them for source (a file named
// go.mod would even cut the directory out of this module).
//
//go:embed templates
var templates embed.FS

// file is one generated file, Path relative to the project root.
type file struct {
	Path string
	Data []byte
}

// layout maps each template to the path it renders to; paths are
// templates too.
var layout = []struct{ tmpl, path string }{
	{"go.mod.tmpl", "go.mod"},
	{"gitignore.tmpl", ".gitignore"},
	{"Makefile.tmpl", "Makefile"},
	{"README.md.tmpl", "README.md"},
	{"main.go.tmpl", "main.go"},
	{"api/groupversion_info.go.tmpl", "api/{{.Version}}/groupversion_info.go"},
	{"api/types.go.tmpl", "api/{{.Version}}/{{.KindLower}}_types.go"},
	{"api/zz_generated.deepcopy.go.tmpl", "api/{{.Version}}/zz_generated.deepcopy.go"},
	{"controller/controller.go.tmpl", "internal/controller/{{.KindLower}}_controller.go"},
	{"controller/controller_test.go.tmpl", "internal/controller/{{.KindLower}}_controller_test.go"},
	{"e2e/e2e_test.go.tmpl", "test/e2e/{{.KindLower}}_test.go"},
	{"config/crd.yaml.tmpl", "config/crd/{{.Group}}_{{.Plural}}.yaml"},
	{"config/role.yaml.tmpl", "config/rbac/role.yaml"},
}

// render executes every template for p, in memory. Go files are gofmt'ed,
// so templates need not align struct fields for every kind's length.
func render(p *project) ([]file, error) {
	out := make([]file, 0, len(layout))
	for _, l := range layout {
		src, err := templates.ReadFile("templates/" + l.tmpl)
		if err != nil {
			return nil, err
		}
		data, err := execute(l.tmpl, string(src), p)
		if err != nil {
			return nil, err
		}
		name, err := execute(l.tmpl+" path", l.path, p)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(string(name), ".go"):
			if data, err = format.Source(data); err != nil {
				return nil, fmt.Errorf("template %s produced invalid Go: %w", l.tmpl, err)
			}
		case strings.HasSuffix(string(name), ".yaml"):
			if data, err = asControllerGenWritesIt(data); err != nil {
				return nil, fmt.Errorf("template %s produced invalid YAML: %w", l.tmpl, err)
			}
		}
		out = append(out, file{Path: string(name), Data: data})
	}
	return out, nil
}

// asControllerGenWritesIt re-encodes a YAML manifest the way controller-gen
// writes one (a "---" line, then sigs.k8s.io/yaml's encoding of the
// object's JSON: sorted keys, long strings folded), so the templates may
// be written for people and `make generate` still changes nothing.
func asControllerGenWritesIt(data []byte) ([]byte, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), y...), nil
}

func execute(name, text string, p *project) ([]byte, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"join": strings.Join}).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// writeProject writes files under dir, all or nothing: they go to a new
// temporary directory next to dir, which is then renamed to dir. dir must
// be absent or empty (checked again here, as it may have changed since
// validation).
func writeProject(dir string, files []file) (err error) {
	if err := checkTargetDir(dir); err != nil {
		return fmt.Errorf("nothing written: DIR %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("nothing written: %w", err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("nothing written: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".ctrlkit-new-")
	if err != nil {
		return fmt.Errorf("nothing written: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, f := range files {
		target := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("nothing written: %w", err)
		}
		if err := os.WriteFile(target, f.Data, 0o644); err != nil {
			return fmt.Errorf("nothing written: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return fmt.Errorf("nothing written: %w", err)
	}
	// An empty dir is replaced (os.Remove fails on anything else), and
	// restored if the rename fails.
	existed := true
	if err := os.Remove(dir); errors.Is(err, os.ErrNotExist) {
		existed = false
	} else if err != nil {
		return fmt.Errorf("nothing written: replacing empty %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if existed {
			_ = os.Mkdir(dir, 0o755)
		}
		return fmt.Errorf("nothing written: %w", err)
	}
	return nil
}
