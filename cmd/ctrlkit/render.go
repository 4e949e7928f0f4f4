package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
// templates too. A template with a condition is rendered only for the
// projects it holds for.
var layout = []struct {
	tmpl, path string
	when       func(*project) bool
}{
	{"go.mod.tmpl", "go.mod", nil},
	{"gitignore.tmpl", ".gitignore", nil},
	{"dockerignore.tmpl", ".dockerignore", nil},
	{"Dockerfile.tmpl", "Dockerfile", nil},
	{"Makefile.tmpl", "Makefile", nil},
	{"README.md.tmpl", "README.md", nil},
	{"main.go.tmpl", "main.go", nil},
	{"config_test.go.tmpl", "config_test.go", nil},
	{"api/groupversion_info.go.tmpl", "api/{{.Version}}/groupversion_info.go", custom},
	{"api/types.go.tmpl", "api/{{.Version}}/{{.KindLower}}_types.go", custom},
	{"api/zz_generated.deepcopy.go.tmpl", "api/{{.Version}}/zz_generated.deepcopy.go", custom},
	{"controller/controller.go.tmpl", "internal/controller/{{.KindLower}}_controller.go", custom},
	{"controller/controller_test.go.tmpl", "internal/controller/{{.KindLower}}_controller_test.go", custom},
	{"controller/builtin.go.tmpl", "internal/controller/{{.KindLower}}_controller.go", builtin},
	{"controller/builtin_test.go.tmpl", "internal/controller/{{.KindLower}}_controller_test.go", builtin},
	{"admission/webhook.go.tmpl", "internal/admission/{{.KindLower}}_webhook.go", withWebhook},
	{"admission/webhook_test.go.tmpl", "internal/admission/{{.KindLower}}_webhook_test.go", withWebhook},
	{"e2e/main_test.go.tmpl", "test/e2e/main_test.go", nil},
	{"e2e/e2e_test.go.tmpl", "test/e2e/{{.KindLower}}_test.go", nil},
	{"e2e/manifests_test.go.tmpl", "test/e2e/manifests_test.go", nil},
	{"e2e/webhook_test.go.tmpl", "test/e2e/webhook_test.go", withWebhook},
	{"config/crd.yaml.tmpl", "config/crd/{{.Group}}_{{.Plural}}.yaml", custom},
	{"config/crd/kustomization.yaml.tmpl", "config/crd/kustomization.yaml", custom},
	{"config/role.yaml.tmpl", "config/rbac/role.yaml", nil},
	{"config/rbac/role_binding.yaml.tmpl", "config/rbac/role_binding.yaml", nil},
	{"config/rbac/service_account.yaml.tmpl", "config/rbac/service_account.yaml", nil},
	{"config/rbac/metrics_reader_role.yaml.tmpl", "config/rbac/metrics_reader_role.yaml", nil},
	{"config/rbac/kustomization.yaml.tmpl", "config/rbac/kustomization.yaml", nil},
	{"config/manager/manager.yaml.tmpl", "config/manager/manager.yaml", nil},
	{"config/manager/metrics_service.yaml.tmpl", "config/manager/metrics_service.yaml", nil},
	{"config/manager/kustomization.yaml.tmpl", "config/manager/kustomization.yaml", nil},
	{"config/webhook/manifests.yaml.tmpl", "config/webhook/manifests.yaml", withWebhook},
	{"config/webhook/service.yaml.tmpl", "config/webhook/service.yaml", withWebhook},
	{"config/webhook/kustomization.yaml.tmpl", "config/webhook/kustomization.yaml", withWebhook},
	{"config/network-policy/metrics.yaml.tmpl", "config/network-policy/metrics.yaml", withNetworkPolicy},
	{"config/network-policy/webhook.yaml.tmpl", "config/network-policy/webhook.yaml", func(p *project) bool { return p.NetworkPolicy && p.Webhook }},
	{"config/network-policy/kustomization.yaml.tmpl", "config/network-policy/kustomization.yaml", withNetworkPolicy},
	{"config/default/kustomization.yaml.tmpl", "config/default/kustomization.yaml", nil},
}

func withWebhook(p *project) bool       { return p.Webhook }
func custom(p *project) bool            { return p.Builtin == nil }
func builtin(p *project) bool           { return p.Builtin != nil }
func withNetworkPolicy(p *project) bool { return p.NetworkPolicy }

// controllerGenWrites are the files `make generate` and `make manifests`
// write, which ctrlkit new writes as controller-gen would.
var controllerGenWrites = []string{"config/crd/{{.Group}}_{{.Plural}}.yaml", "config/rbac/role.yaml"}

// render executes every template for p, in memory. Go files are gofmt'ed,
// so templates need not align struct fields for every kind's length.
func render(p *project) ([]file, error) {
	out := make([]file, 0, len(layout))
	for _, l := range layout {
		if l.when != nil && !l.when(p) {
			continue
		}
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
		case slices.Contains(controllerGenWrites, l.path):
			if data, err = asControllerGenWritesIt(data); err != nil {
				return nil, fmt.Errorf("template %s produced invalid YAML: %w", l.tmpl, err)
			}
		case strings.HasSuffix(string(name), ".yaml"):
			if err := checkYAML(data); err != nil {
				return nil, fmt.Errorf("template %s produced invalid YAML: %w", l.tmpl, err)
			}
		}
		out = append(out, file{Path: string(name), Data: data})
	}
	return out, nil
}

// separator is the line between two documents of a YAML stream.
var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// documents splits a YAML stream at its "---" lines; empty documents are
// dropped.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range separator.Split(string(data), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// checkYAML checks that every document of a hand-written manifest parses
// (comments and layout are kept as the template has them).
func checkYAML(data []byte) error {
	for _, d := range documents(data) {
		if _, err := yaml.YAMLToJSON(d); err != nil {
			return err
		}
	}
	return nil
}

// asControllerGenWritesIt re-encodes a YAML manifest the way controller-gen
// writes one (for each object a "---" line, then sigs.k8s.io/yaml's
// encoding of its JSON: sorted keys, long strings folded), so the templates may
// be written for people and `make generate` still changes nothing.
func asControllerGenWritesIt(data []byte) ([]byte, error) {
	var out []byte
	for _, d := range documents(data) {
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			return nil, err
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return nil, err
		}
		out = append(append(out, "---\n"...), y...)
	}
	return out, nil
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
