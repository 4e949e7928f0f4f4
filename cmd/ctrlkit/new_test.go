package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*/**.golden from the templates")

// memcached are the flags of a golden project: the deployment template
// with the webhooks.
var memcached = []string{"--module", "example.com/memcached-operator", "--group", "cache.example.com", "--version", "v1alpha1", "--kind", "Memcached", "--template", "deployment", "--webhook"}

// guestbook are the flags of the other golden project: the minimal
// template, the default, without webhooks.
var guestbook = []string{"--module", "example.com/guestbook-operator", "--group", "web.example.com", "--version", "v1", "--kind", "Guestbook"}

// configmaps are the flags of a golden project over a built-in kind: a
// controller of the core group's ConfigMaps, with no CRD.
var configmaps = []string{"--module", "example.com/configmap-operator", "--group", "", "--kind", "ConfigMap"}

// deployments are the flags of a project over a built-in kind of a named
// group, apps; the version is its preferred one.
var deployments = []string{"--module", "example.com/deployment-operator", "--group", "apps", "--kind", "Deployment"}

// goldens are the golden projects under testdata, by directory.
var goldens = map[string][]string{"memcached-operator": memcached, "guestbook-operator": guestbook, "configmap-operator": configmaps}

// ctrlkitNew runs `ctrlkit new args...` and returns its status, stdout and
// stderr.
func ctrlkitNew(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"new"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// builtinWith returns configmaps with the extra flags.
func builtinWith(flags ...string) []string { return append(slices.Clone(configmaps), flags...) }

// flagsWithout returns memcached without flag name.
func flagsWithout(name string) []string {
	args := slices.Clone(memcached)
	i := slices.Index(args, "--"+name)
	return slices.Delete(args, i, i+2)
}

// flagsWith returns memcached with flag name set to value.
func flagsWith(name, value string) []string {
	args := slices.Clone(memcached)
	i := slices.Index(args, "--"+name)
	args[i+1] = value
	return args
}

// listFiles returns the slash paths of the regular files under dir.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func TestNewRefusesBadInput(t *testing.T) {
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "keep.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	otherModule := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherModule, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string // DIR is appended unless dir is set
		dir  string   // a DIR to use instead of a fresh path; "-" for none
		want []string // in stderr
	}{
		{"no module", flagsWith("module", ""), "", []string{"--module is required"}},
		{"module without a dot", flagsWith("module", "memcached"), "", []string{`--module "memcached" is not a valid module path`}},
		{"module upper case", flagsWith("module", "Example.com/op"), "", []string{"is not a valid module path"}},
		{"module with a space", flagsWith("module", "example.com/my op"), "", []string{"is not a valid module path"}},
		{"module with ..", flagsWith("module", "example.com/../op"), "", []string{"is not a valid module path"}},
		{"module trailing slash", flagsWith("module", "example.com/op/"), "", []string{"is not a valid module path"}},
		{"module name starting with a digit", flagsWith("module", "example.com/9ops"), "", []string{`--module "example.com/9ops": the project's name "9ops" (from the module path's last element) starts the names of its namespace and Services, so it must start with a letter and have at most 55 characters`}},
		{"module name too long", flagsWith("module", "example.com/o"+strings.Repeat("p", 55)), "", []string{"must start with a letter and have at most 55 characters"}},
		{"no group", flagsWithout("group"), "", []string{"--group is required"}},
		{"custom kind in the core group", flagsWith("group", ""), "", []string{`--kind Memcached: the built-in group "" (core) version v1alpha1 has no namespaced kind ctrlkit new can scaffold (check --version)`}},
		{"custom kind in the core group's version", []string{"--module", "example.com/op", "--group", "", "--version", "v1", "--kind", "Memcached"}, "", []string{`--kind Memcached is not a namespaced kind of the built-in group "" (core) version v1: use one of `, "ConfigMap, "}},
		{"core kind in apps", []string{"--module", "example.com/op", "--group", "apps", "--kind", "ConfigMap"}, "", []string{"--kind ConfigMap is not a namespaced kind of the built-in group apps: use one of ", "Deployment, "}},
		{"cluster-scoped built-in kind", []string{"--module", "example.com/op", "--group", "core", "--kind", "Namespace"}, "", []string{"--kind Namespace is cluster-scoped: ctrlkit new scaffolds namespaced kinds only"}},
		{"built-in kind in an unknown version", []string{"--module", "example.com/op", "--group", "apps", "--version", "v9", "--kind", "Deployment"}, "", []string{"--kind Deployment: the built-in group apps version v9 has no namespaced kind ctrlkit new can scaffold (check --version)"}},
		{"built-in group without objects", []string{"--module", "example.com/op", "--group", "authentication.k8s.io", "--kind", "TokenReview"}, "", []string{"--kind TokenReview: the built-in group authentication.k8s.io has no namespaced kind ctrlkit new can scaffold"}},
		{"built-in kind with the deployment template", builtinWith("--template", "deployment"), "", []string{"--template deployment keeps a Deployment per object from its spec.replicas and spec.image, fields of a custom resource: drop --template for a controller over the built-in ConfigMap"}},
		{"built-in kind with webhooks", builtinWith("--webhook"), "", []string{"--webhook scaffolds webhooks for a custom resource only: drop it for the built-in ConfigMap"}},
		{"built-in kind in a bad version", builtinWith("--version", "1"), "", []string{`--version "1" is not a Kubernetes API version`}},
		{"group upper case", flagsWith("group", "Cache.example.com"), "", []string{`--group "Cache.example.com" is not a DNS subdomain`}},
		{"group with underscore", flagsWith("group", "my_cache.example.com"), "", []string{"is not a DNS subdomain"}},
		{"group empty label", flagsWith("group", "cache..example.com"), "", []string{"is not a DNS subdomain"}},
		{"group leading dash", flagsWith("group", "-cache.example.com"), "", []string{"is not a DNS subdomain"}},
		{"group without a dot", flagsWith("group", "cache"), "", []string{`--group "cache" has no dot and is no built-in group`}},
		{"group reserved", flagsWith("group", "cache.k8s.io"), "", []string{"reserved for Kubernetes APIs"}},
		{"no version", flagsWith("version", ""), "", []string{"--version is required"}},
		{"version without v", flagsWith("version", "1"), "", []string{`--version "1" is not a Kubernetes API version`}},
		{"version zero", flagsWith("version", "v0"), "", []string{"is not a Kubernetes API version"}},
		{"version leading zero", flagsWith("version", "v01"), "", []string{"is not a Kubernetes API version"}},
		{"version alpha without number", flagsWith("version", "v1alpha"), "", []string{"is not a Kubernetes API version"}},
		{"version gamma", flagsWith("version", "v1gamma1"), "", []string{"is not a Kubernetes API version"}},
		{"version upper case", flagsWith("version", "V1"), "", []string{"is not a Kubernetes API version"}},
		{"no kind", flagsWith("kind", ""), "", []string{"--kind is required"}},
		{"kind lower case", flagsWith("kind", "memcached"), "", []string{`--kind "memcached" is not UpperCamelCase`}},
		{"kind with underscore", flagsWith("kind", "Mem_cached"), "", []string{"is not UpperCamelCase"}},
		{"kind with dash", flagsWith("kind", "Mem-Cached"), "", []string{"is not UpperCamelCase"}},
		{"kind starting with a digit", flagsWith("kind", "9Lives"), "", []string{"is not UpperCamelCase"}},
		{"kind too long", flagsWith("kind", "K"+strings.Repeat("a", 62)), "", []string{"is too long"}},
		{"kind clashing", flagsWith("kind", "GroupVersion"), "", []string{"would clash with a name the API package declares"}},
		{"kind clashing through a suffix", flagsWith("kind", "SchemeBuilder"), "", []string{"would clash"}},
		{"unknown template", flagsWith("template", "memcached"), "", []string{`--template "memcached" is not a template: use minimal (a Ready condition, nothing else) or deployment (a Deployment per object)`}},
		{"empty template", flagsWith("template", ""), "", []string{`--template "" is not a template`}},
		{"webhook with a value", append(slices.Clone(memcached), "--webhook=maybe"), "", []string{`invalid boolean value "maybe" for -webhook`}},
		{"network-policy with a value", append(slices.Clone(memcached), "--network-policy=off"), "", []string{`invalid boolean value "off" for -network-policy`}},
		{"dir not empty", memcached, notEmpty, []string{"is not empty (it holds keep.txt)"}},
		{"dir is a file", memcached, aFile, []string{"exists and is not a directory"}},
		{"no dir", memcached, "-", []string{"missing DIR"}},
		{"two dirs", append(slices.Clone(memcached), "a", "b"), "-", []string{"want one DIR, got 2"}},
		{"replace without go.mod", append(slices.Clone(memcached), "--ctrlkit-replace", t.TempDir()), "", []string{"no go.mod there"}},
		{"replace of another module", append(slices.Clone(memcached), "--ctrlkit-replace", otherModule), "", []string{`its go.mod is module "example.com/other"`}},
		{"unknown flag", append(slices.Clone(memcached), "--kindd", "X"), "", []string{"flag provided but not defined: -kindd"}},
		{"everything wrong at once", []string{"--module", "x", "--group", "X", "--version", "1", "--kind", "x"}, "", []string{
			"--module", "--group", "--version", "--kind",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			args := tc.args
			dir := filepath.Join(parent, "out")
			switch tc.dir {
			case "":
				args = append(slices.Clone(args), dir)
			case "-":
			default:
				dir = tc.dir
				args = append(slices.Clone(args), dir)
			}
			before := listFiles(t, dir)
			code, stdout, stderr := ctrlkitNew(args...)
			if code != 2 {
				t.Errorf("status %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("something was written next to DIR: %v", entries)
			}
			if after := listFiles(t, dir); !slices.Equal(before, after) {
				t.Errorf("DIR changed from %v to %v", before, after)
			}
		})
	}
}

func TestNewWritesGoldenProjects(t *testing.T) {
	for name, flags := range goldens {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "nested", name) // parents are created
			code, stdout, stderr := ctrlkitNew(append(slices.Clone(flags), dir)...)
			if code != 0 {
				t.Fatalf("status %d; stderr:\n%s", code, stderr)
			}
			// A test binary is built from a working tree: go.mod cannot name a
			// ctrlkit release, and ctrlkit new says so.
			if !strings.Contains(stderr, "--ctrlkit-replace") {
				t.Errorf("stderr does not suggest --ctrlkit-replace:\n%s", stderr)
			}
			got := listFiles(t, dir)
			for _, f := range got {
				if !strings.Contains(stdout, "  "+f+"\n") {
					t.Errorf("stdout does not list %s:\n%s", f, stdout)
				}
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("DIR mode = %v (err=%v), want 0755", fi.Mode(), err)
			}
			checkGolden(t, dir, got, filepath.Join("testdata", name))
		})
	}
}

// checkGolden compares the files of dir with golden/*.golden, or rewrites
// them with -update.
func checkGolden(t *testing.T, dir string, files []string, golden string) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		g := filepath.Join(golden, filepath.FromSlash(f)+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(g), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(g, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wantData, err := os.ReadFile(g)
		if err != nil {
			t.Errorf("%s: no golden file (run go test -update): %v", f, err)
			continue
		}
		if !bytes.Equal(data, wantData) {
			t.Errorf("%s differs from %s (run go test -update and review the diff)", f, g)
		}
	}
	var want []string
	for _, g := range listFiles(t, golden) {
		want = append(want, strings.TrimSuffix(g, ".golden"))
	}
	if !*update && !slices.Equal(files, want) {
		t.Errorf("files = %v\nwant %v", files, want)
	}
}

func TestNewIntoEmptyDirWithFlagsAfterDir(t *testing.T) {
	dir := t.TempDir() // exists, empty
	code, _, stderr := ctrlkitNew(append([]string{dir}, memcached...)...)
	if code != 0 {
		t.Fatalf("status %d; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "api", "v1alpha1", "memcached_types.go")); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Errorf("temporary files left next to DIR: %v", entries)
	}
}

func TestNewReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "op")
	code, _, stderr := ctrlkitNew(append(slices.Clone(memcached), "--ctrlkit-replace", "../..", dir)...)
	if code != 0 {
		t.Fatalf("status %d; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "note:") {
		t.Errorf("a note although --ctrlkit-replace is set:\n%s", stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(mf.Replace) != 1 || mf.Replace[0].Old.Path != ctrlkitModule || mf.Replace[0].New.Path != root {
		t.Errorf("replace = %+v, want %s => %s (absolute)", mf.Replace, ctrlkitModule, root)
	}
}

// TestNewVariants generates projects for other inputs and checks what
// depends on them: paths, names, the plural, and the roles' names and the
// order of their rules (controller-gen's, which TestNewProjectE2E checks
// for two projects by running it).
func TestNewVariants(t *testing.T) {
	for _, tc := range []struct {
		module, group, version, kind, template string
		wantFiles                              []string
		wantName                               string
		wantGroups                             []string // of the ClusterRole's rules, in order
		noFiles                                []string // prefixes no file may have
	}{
		{"example.com/proxy-operator/v2", "app.example.com", "v1", "Proxy", "deployment",
			[]string{"api/v1/proxy_types.go", "config/crd/app.example.com_proxies.yaml", "internal/controller/proxy_controller.go", "test/e2e/proxy_test.go"},
			"proxy-operator", []string{"", "app.example.com", "app.example.com", "apps", "authentication.k8s.io", "authorization.k8s.io"}, nil},
		{"github.com/acme/bus", "zz.acme.io", "v2beta3", "Bus", "deployment",
			[]string{"api/v2beta3/bus_types.go", "config/crd/zz.acme.io_buses.yaml"},
			"bus", []string{"", "apps", "authentication.k8s.io", "authorization.k8s.io", "zz.acme.io", "zz.acme.io"}, nil},
		{"example.com/Gw.Operator", "apps.example.com", "v1alpha1", "GatewayClass", "deployment",
			[]string{"api/v1alpha1/gatewayclass_types.go", "config/crd/apps.example.com_gatewayclasses.yaml"},
			"gw-operator", []string{"", "apps", "apps.example.com", "apps.example.com", "authentication.k8s.io", "authorization.k8s.io"}, nil},
		{"example.com/a-operator", "a.example.com", "v1", "Apple", "minimal",
			[]string{"api/v1/apple_types.go", "config/crd/a.example.com_apples.yaml"},
			"a-operator", []string{"", "a.example.com", "a.example.com", "authentication.k8s.io", "authorization.k8s.io"}, nil},
		{"example.com/cm-operator", "", "", "ConfigMap", "minimal",
			[]string{"internal/controller/configmap_controller.go", "test/e2e/configmap_test.go"},
			"cm-operator", []string{"", "", "authentication.k8s.io", "authorization.k8s.io"}, []string{"api/", "config/crd/"}},
		{"example.com/deploy-operator", "apps", "v1", "Deployment", "minimal",
			[]string{"internal/controller/deployment_controller.go", "test/e2e/deployment_test.go"},
			"deploy-operator", []string{"", "apps", "authentication.k8s.io", "authorization.k8s.io"}, []string{"api/", "config/crd/"}},
		{"example.com/np-operator", "networking.k8s.io", "", "NetworkPolicy", "minimal",
			[]string{"internal/controller/networkpolicy_controller.go", "test/e2e/networkpolicy_test.go"},
			"np-operator", []string{"", "authentication.k8s.io", "authorization.k8s.io", "networking.k8s.io"}, []string{"api/", "config/crd/"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "op")
			code, _, stderr := ctrlkitNew("--module", tc.module, "--group", tc.group, "--version", tc.version, "--kind", tc.kind, "--template", tc.template, dir)
			if code != 0 {
				t.Fatalf("status %d; stderr:\n%s", code, stderr)
			}
			files := listFiles(t, dir)
			for _, f := range tc.wantFiles {
				if !slices.Contains(files, f) {
					t.Errorf("no %s in %v", f, files)
				}
			}
			for _, f := range files {
				for _, prefix := range tc.noFiles {
					if strings.HasPrefix(f, prefix) {
						t.Errorf("%s written, want nothing under %s", f, prefix)
					}
				}
			}
			roles := readRoles(t, filepath.Join(dir, "config", "rbac", "role.yaml"))
			if len(roles) != 2 {
				t.Fatalf("role.yaml holds %d roles, want a ClusterRole and the leader election Role", len(roles))
			}
			if cr := roles[0]; cr.Kind != "ClusterRole" || cr.Metadata.Name != tc.wantName {
				t.Errorf("first role is %s %s, want ClusterRole %s", cr.Kind, cr.Metadata.Name, tc.wantName)
			}
			var groups []string
			for _, r := range roles[0].Rules {
				groups = append(groups, r.APIGroups...)
			}
			if !slices.Equal(groups, tc.wantGroups) {
				t.Errorf("ClusterRole rules are for groups %q, want %q", groups, tc.wantGroups)
			}
			if r := roles[1]; r.Kind != "Role" || r.Metadata.Name != tc.wantName+"-leader-election" || r.Metadata.Namespace != tc.wantName+"-system" {
				t.Errorf("second role is %s %s/%s, want Role %s-system/%s-leader-election", r.Kind, r.Metadata.Namespace, r.Metadata.Name, tc.wantName, tc.wantName)
			}
		})
	}
}

// rbacRole is what the tests read of a Role or ClusterRole.
type rbacRole struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Rules    []struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string
		Verbs     []string
	}
}

// readRoles reads the roles of a role.yaml.
func readRoles(t *testing.T, file string) []rbacRole {
	t.Helper()
	var roles []rbacRole
	for _, doc := range documents(mustRead(t, file)) {
		var r rbacRole
		if err := yaml.Unmarshal(doc, &r); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		roles = append(roles, r)
	}
	return roles
}

func TestPluralize(t *testing.T) {
	for in, want := range map[string]string{
		"memcached": "memcacheds", "bus": "buses", "box": "boxes", "waltz": "waltzes",
		"batch": "batches", "mesh": "meshes", "proxy": "proxies", "gateway": "gateways",
		"policy": "policies", "key": "keys", "y": "ys",
	} {
		if got := pluralize(in); got != want {
			t.Errorf("pluralize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProjectName(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/memcached-operator":    "memcached-operator",
		"example.com/memcached-operator/v2": "memcached-operator",
		"github.com/Acme/Foo_Bar.op":        "foo-bar-op",
		"example.com/_":                     "operator",
	} {
		if got := projectName(in); got != want {
			t.Errorf("projectName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRequiresMatchGoMod keeps the versions a generated project requires in
// step with the ones ctrlkit builds and tests with: the library's go.mod
// for what the operator imports, and for k8s.io/component-helpers
// (config_test.go's RBAC comparison), which ctrlkit does not import, the
// library's k8s.io/api: Kubernetes releases its staging modules together.
func TestRequiresMatchGoMod(t *testing.T) {
	parse := func(name string) *modfile.File {
		mf, err := modfile.Parse(name, mustRead(t, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return mf
	}
	library := parse(filepath.Join("..", "..", "go.mod"))
	for _, r := range requires {
		mf, path := library, r.Path
		if r.Path == "k8s.io/component-helpers" {
			path = "k8s.io/api"
		}
		i := slices.IndexFunc(mf.Require, func(q *modfile.Require) bool { return q.Mod.Path == path })
		if i < 0 {
			t.Errorf("%s does not require %s", mf.Syntax.Name, path)
			continue
		}
		if got := mf.Require[i].Mod.Version; got != r.Version {
			t.Errorf("generated projects require %s %s, %s %s %s: update requires in new.go", r.Path, r.Version, mf.Syntax.Name, path, got)
		}
	}
	if want := "go " + library.Go.Version; !strings.Contains(string(mustRead(t, "templates/go.mod.tmpl")), "\n"+want+"\n") {
		t.Errorf("templates/go.mod.tmpl does not say %q like ctrlkit's go.mod", want)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{nil, 2, "Usage:"},
		{[]string{"help"}, 0, "ctrlkit new [flags] DIR"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"new", "-h"}, 0, "-ctrlkit-replace"},
		{[]string{"new", "-h"}, 0, "--network-policy=false leaves them out"},
		{[]string{"version"}, 0, "ctrlkit " + release},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("ctrlkit %q: status %d, output %q; want status %d and %q", tc.args, code, out.String()+errb.String(), tc.code, tc.out)
		}
	}
}

// TestReleaseMatchesChangelog keeps the version ctrlkit version prints in
// step with the newest release in CHANGELOG.md.
func TestReleaseMatchesChangelog(t *testing.T) {
	for _, line := range strings.Split(string(mustRead(t, filepath.Join("..", "..", "CHANGELOG.md"))), "\n") {
		if v, ok := strings.CutPrefix(line, "## "); ok {
			if v, _, _ = strings.Cut(v, " "); v != release {
				t.Errorf("CHANGELOG.md's newest release is %s, the release constant in new.go %s: keep them equal", v, release)
			}
			return
		}
	}
	t.Error("CHANGELOG.md has no release heading (## vX.Y.Z - date)")
}
