package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ctrlkitModule is the module path of ctrlkit, which generated projects
// require.
const ctrlkitModule = "github.com/ctrlkit/ctrlkit"

// commandModule is the module of this command, released with the library
// under the same version (tags vX.Y.Z and cmd/ctrlkit/vX.Y.Z).
const commandModule = ctrlkitModule + "/cmd/ctrlkit"

// release is the version of ctrlkit this source tree is: the newest entry
// of CHANGELOG.md (TestReleaseMatchesChangelog).
const release = "v0.1.0"

// develVersion is the version a generated go.mod requires of ctrlkit when
// this binary does not know its own release (built from a working tree):
// the placeholder Go uses for replaced modules.
const develVersion = "v0.0.0-00010101000000-000000000000"

// NewOptions are the inputs of ctrlkit new, one per flag plus the target
// directory.
type NewOptions struct {
	Module         string // --module: the new project's Go module path
	Group          string // --group: the API group, a DNS subdomain with a dot, or a built-in group ("" or core, apps, ...)
	GroupSet       bool   // --group was given, so an empty Group is the core group
	Version        string // --version: the API version, like v1, v1alpha1, v2beta3
	Kind           string // --kind: the kind, UpperCamelCase
	Template       string // --template: what the controller does, one of templateNames; empty means minimal
	Webhook        bool   // --webhook: add a validating and a defaulting webhook
	NetworkPolicy  bool   // --network-policy: write config/network-policy (the flag's default is true)
	CtrlkitReplace string // --ctrlkit-replace: a ctrlkit checkout to build against, or empty
	Dir            string // DIR: where the project is written; absent or empty
}

// The templates --template chooses from.
const (
	// templateMinimal is a reconciler that reports a Ready condition with
	// observedGeneration and does nothing else: the start of any operator.
	templateMinimal = "minimal"
	// templateDeployment is a reconciler that keeps a Deployment per
	// object, scaled to spec.replicas, and reports its progress.
	templateDeployment = "deployment"
)

// templateNames are the values --template accepts, the default first.
var templateNames = []string{templateMinimal, templateDeployment}

func runNew(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ctrlkit new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o NewOptions
	fs.StringVar(&o.Module, "module", "", "Go `module` path of the new project, e.g. example.com/memcached-operator (required)")
	fs.StringVar(&o.Group, "group", "", "API `group` of the kind (required): for a custom resource a DNS subdomain with at least one dot, e.g. cache.example.com; for a built-in kind its group, \"\" or core for ConfigMap, Pod, ..., apps for Deployment, ... (no CRD is written)")
	fs.StringVar(&o.Version, "version", "", "API `version` of the kind: v1, v1alpha1, v2beta3, ... (required for a custom resource; for a built-in kind the group's preferred version by default)")
	fs.StringVar(&o.Kind, "kind", "", "`kind` to reconcile, UpperCamelCase, e.g. Memcached, or a built-in kind of --group such as ConfigMap or Deployment (required)")
	fs.StringVar(&o.Template, "template", templateMinimal, "what the controller does: `NAME` is "+templateMinimal+" (a Ready condition with observedGeneration, nothing else) or "+templateDeployment+" (a Deployment per object, scaled to spec.replicas)")
	fs.BoolVar(&o.Webhook, "webhook", false, "add a validating and a defaulting admission webhook for the kind, served with certificates the operator makes and keeps itself")
	fs.BoolVar(&o.NetworkPolicy, "network-policy", true, "write NetworkPolicies (config/network-policy): the operator's pods then accept connections only on the metrics port, from namespaces labelled metrics=enabled, and with --webhook on the webhook port, from any address (no policy can name the API server); --network-policy=false leaves them out")
	fs.StringVar(&o.CtrlkitReplace, "ctrlkit-replace", "", "build against the ctrlkit checkout at `PATH`: go.mod gets replace "+ctrlkitModule+" => PATH")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: ctrlkit new [flags] DIR\n\nWrites a new operator project into DIR, which must be absent or empty.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	dirs, err := parseInterspersed(fs, args)
	fs.Visit(func(f *flag.Flag) { o.GroupSet = o.GroupSet || f.Name == "group" })
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the flag package has printed the error and the usage
	}
	switch len(dirs) {
	case 0:
		fmt.Fprintln(stderr, "ctrlkit new: missing DIR: say where to write the project, e.g. ctrlkit new [flags] ./my-operator")
		return 2
	case 1:
		o.Dir = dirs[0]
	default:
		fmt.Fprintf(stderr, "ctrlkit new: want one DIR, got %d arguments: %q\n", len(dirs), dirs)
		return 2
	}

	p, err := newProject(o)
	if err != nil {
		fmt.Fprintf(stderr, "ctrlkit new: nothing written:\n%v\n", err)
		return 2
	}
	files, err := render(p)
	if err != nil {
		fmt.Fprintf(stderr, "ctrlkit new: nothing written: %v\n", err)
		return 1
	}
	if err := writeProject(o.Dir, files); err != nil {
		fmt.Fprintf(stderr, "ctrlkit new: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Wrote %s (%d files) to %s:\n", p.Module, len(files), o.Dir)
	for _, f := range files {
		fmt.Fprintf(stdout, "  %s\n", f.Path)
	}
	if p.Builtin != nil && !p.Builtin.HasSample() {
		fmt.Fprintf(stderr, "note: ctrlkit new does not know what the API server requires of a %s: the sample of test/e2e/%s_test.go has metadata only; complete it, or make test fails creating it\n", p.Kind, p.KindLower)
	}
	if p.CtrlkitReplace == "" && p.CtrlkitVersion == develVersion {
		fmt.Fprintf(stderr, "note: this ctrlkit was built from a working tree, so go.mod requires %s %s, which no proxy serves: pass --ctrlkit-replace PATH to build against a checkout\n", ctrlkitModule, develVersion)
	}
	fmt.Fprintf(stdout, "\nNext:\n  cd %s\n  go mod tidy\n  make test                           # unit tests, then the e2e tests (needs KUBEBUILDER_ASSETS)\n  make docker-build docker-push IMG=...  # needs a container engine\n  make deploy IMG=...                # into the cluster of $KUBECONFIG\nREADME.md says more.\n", o.Dir)
	return 0
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (the flag package stops at the first positional).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// project is everything the templates need, derived from validated
// NewOptions.
type project struct {
	Module  string // example.com/memcached-operator
	Name    string // memcached-operator: binary, manager and ClusterRole name
	Group   string // cache.example.com
	Version string // v1alpha1, also the Go package name of the API
	Kind    string // Memcached
	// Builtin is the kind's Go type when the API server serves the kind
	// itself (--group "" and --kind ConfigMap): no API package, no CRD.
	Builtin *builtinType

	KindLower string // memcached: the singular resource name
	Plural    string // memcacheds: the resource

	Template      string // templateMinimal or templateDeployment
	Webhook       bool   // the webhook scaffolding is written
	NetworkPolicy bool   // config/network-policy is written
	Namespace     string // memcached-operator-system: where config/ deploys the operator

	CtrlkitVersion string // the version of ctrlkit go.mod requires
	CtrlkitReplace string // absolute path of a ctrlkit checkout, or empty
	Requires       []module.Version
	ControllerGen  string // the pinned controller-tools version
	Kustomize      string // the pinned kustomize version
	Roles          []role // config/rbac/role.yaml, as controller-gen writes it
}

// APIVersion is the kind's apiVersion: v1 for the core group, else
// group/version.
func (p *project) APIVersion() string {
	if p.Group == "" {
		return p.Version
	}
	return p.Group + "/" + p.Version
}

// ManagedBy is the label selector of the objects a controller over a
// built-in kind reconciles: only those labelled as managed by the
// operator, so that it neither caches nor touches the others.
func (p *project) ManagedBy() string { return "app.kubernetes.io/managed-by=" + p.Name }

// Deployment reports whether the project uses the deployment template.
func (p *project) Deployment() bool { return p.Template == templateDeployment }

// ValidatePath and DefaultPath are where the webhook server serves the
// validating and the defaulting webhook: kubebuilder's scheme, such as
// /validate-cache-example-com-v1alpha1-memcached.
func (p *project) ValidatePath() string { return p.webhookPath("validate") }

// DefaultPath: see ValidatePath.
func (p *project) DefaultPath() string { return p.webhookPath("mutate") }

func (p *project) webhookPath(verb string) string {
	return "/" + verb + "-" + strings.ReplaceAll(p.Group, ".", "-") + "-" + p.Version + "-" + p.KindLower
}

// The versions a generated go.mod requires besides ctrlkit: the ones
// ctrlkit itself builds and tests with (TestRequiresMatchGoMod keeps them
// in step with ctrlkit's go.mod).
var requires = []module.Version{
	{Path: "github.com/go-logr/logr", Version: "v1.4.4"},
	{Path: "k8s.io/api", Version: "v0.37.2"},
	{Path: "k8s.io/apimachinery", Version: "v0.37.2"},
	{Path: "k8s.io/client-go", Version: "v0.37.2"},
	{Path: "k8s.io/component-helpers", Version: "v0.37.2"}, // RBAC rule comparison, in config_test.go only
}

// controllerGenVersion is the controller-tools release that `make generate`
// runs; the pre-generated files are byte for byte what it writes.
const controllerGenVersion = "v0.23.0"

// kustomizeVersion is the kustomize release that `make build-installer`
// runs to render config/default.
const kustomizeVersion = "v5.8.1"

// reservedNames are declared by the generated API package besides the
// kind's types: a kind whose types would have one of these names is refused.
var reservedNames = []string{"AddToScheme", "ConditionReady", "GroupVersion", "SchemeBuilder"}

var (
	kindRE    = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*$`)
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
)

// newProject validates o and derives the project. The error lists every
// problem, each naming its flag and the fix. It checks the target directory
// but writes nothing.
func newProject(o NewOptions) (*project, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("  "+format, args...)) }

	if o.Module == "" {
		bad("--module is required: the Go module path of the project, e.g. example.com/memcached-operator")
	} else if err := module.CheckPath(o.Module); err != nil {
		bad("--module %q is not a valid module path: %v (use a path like example.com/memcached-operator)", o.Module, err)
	} else if name := projectName(o.Module); len(validation.IsDNS1035Label(name+longestSuffix)) > 0 {
		bad("--module %q: the project's name %q (from the module path's last element) starts the names of its namespace and Services, so it must start with a letter and have at most %d characters: use a path like example.com/memcached-operator",
			o.Module, name, validation.DNS1035LabelMaxLength-len(longestSuffix))
	}

	group := o.Group
	if group == "core" {
		group = ""
	}
	builtin := o.GroupSet && o.Group == "" || o.Group == "core" || group != "" && builtinGroup(group)
	switch {
	case builtin:
		// A kind the API server serves itself: checked with --kind below.
	case o.Group == "":
		bad("--group is required: the API group, e.g. cache.example.com for a custom resource, or \"\" (core), apps, batch, ... for a built-in kind")
	case len(validation.IsDNS1123Subdomain(o.Group)) > 0:
		bad("--group %q is not a DNS subdomain: %s (use lower case letters, digits, '-' and '.', e.g. cache.example.com)", o.Group, strings.Join(validation.IsDNS1123Subdomain(o.Group), "; "))
	case !strings.Contains(o.Group, "."):
		bad("--group %q has no dot and is no built-in group: CRD groups must be domains like %s.example.com; the built-in groups without a dot are \"\" (core), apps, batch, policy, ...", o.Group, o.Group)
	case o.Group == "k8s.io" || o.Group == "kubernetes.io" || strings.HasSuffix(o.Group, ".k8s.io") || strings.HasSuffix(o.Group, ".kubernetes.io"):
		bad("--group %q is reserved for Kubernetes APIs (it needs an API review approval): use a domain you own", o.Group)
	}

	switch {
	case o.Version == "" && builtin:
		// The group's preferred version that has the kind.
	case o.Version == "":
		bad("--version is required: the API version, e.g. v1alpha1")
	case !versionRE.MatchString(o.Version):
		bad("--version %q is not a Kubernetes API version: use v1, v2, v1alpha1, v1beta2, ... (v, a number from 1, optionally alpha or beta and a number from 1)", o.Version)
	}

	var plural string
	var bt *builtinType
	switch {
	case o.Kind == "":
		bad("--kind is required: the kind to reconcile in UpperCamelCase, e.g. Memcached, or a kind of the built-in group such as ConfigMap")
	case builtin && (o.Version == "" || versionRE.MatchString(o.Version)):
		b, err := lookupBuiltin(group, o.Version, o.Kind)
		if err != nil {
			bad("%v", err)
			break
		}
		bt, plural = &b, builtinPlural(o.Kind)
		if o.Template == templateDeployment {
			bad("--template %s keeps a Deployment per object from its spec.replicas and spec.image, fields of a custom resource: drop --template for a controller over the built-in %s", templateDeployment, o.Kind)
		}
		if o.Webhook {
			bad("--webhook scaffolds webhooks for a custom resource only: drop it for the built-in %s, and see pkg/webhook to admit built-in kinds", o.Kind)
		}
	case builtin:
		// The version is refused above.
	case !kindRE.MatchString(o.Kind):
		bad("--kind %q is not UpperCamelCase: start with an upper case letter, then letters and digits only, e.g. Memcached or CronJob", o.Kind)
	case slices.ContainsFunc([]string{"", "List", "Spec", "Status"}, func(suffix string) bool { return slices.Contains(reservedNames, o.Kind+suffix) }):
		bad("--kind %q would clash with a name the API package declares (%s): choose another kind", o.Kind, strings.Join(reservedNames, ", "))
	default:
		plural = pluralize(strings.ToLower(o.Kind))
		if len(plural) > validation.DNS1035LabelMaxLength {
			bad("--kind %q is too long: its resource name %q must have at most %d characters", o.Kind, plural, validation.DNS1035LabelMaxLength)
		}
	}

	if !slices.Contains(templateNames, o.Template) {
		bad("--template %q is not a template: use %s (a Ready condition, nothing else) or %s (a Deployment per object)", o.Template, templateMinimal, templateDeployment)
	}

	replace := ""
	if o.CtrlkitReplace != "" {
		var err error
		if replace, err = checkCtrlkitCheckout(o.CtrlkitReplace); err != nil {
			bad("--ctrlkit-replace %q: %v", o.CtrlkitReplace, err)
		}
	}

	if err := checkTargetDir(o.Dir); err != nil {
		bad("DIR %v", err)
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	name := projectName(o.Module)
	p := &project{
		Module:         o.Module,
		Name:           name,
		Group:          group,
		Version:        o.Version,
		Builtin:        bt,
		Kind:           o.Kind,
		KindLower:      strings.ToLower(o.Kind),
		Plural:         plural,
		Template:       o.Template,
		Webhook:        o.Webhook,
		NetworkPolicy:  o.NetworkPolicy,
		Namespace:      name + "-system",
		CtrlkitVersion: ctrlkitVersion(),
		CtrlkitReplace: replace,
		Requires:       requires,
		ControllerGen:  controllerGenVersion,
		Kustomize:      kustomizeVersion,
	}
	if bt != nil {
		p.Version = bt.GVK.Version
	}
	p.Roles = roles(p)
	return p, nil
}

// checkTargetDir accepts a directory that does not exist or is empty.
func checkTargetDir(dir string) error {
	if dir == "" {
		return errors.New("is empty: say where to write the project")
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%q exists and is not a directory: choose a new directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%q is not empty (it holds %s): choose a new or empty directory, nothing is overwritten", dir, entries[0].Name())
	}
	return nil
}

// checkCtrlkitCheckout returns the absolute path of dir after checking that
// it holds ctrlkit's go.mod.
func checkCtrlkitCheckout(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("no go.mod there: point it at the root of a ctrlkit checkout (%w)", err)
	}
	if got := modfile.ModulePath(data); got != ctrlkitModule {
		return "", fmt.Errorf("its go.mod is module %q, not %s: point it at the root of a ctrlkit checkout", got, ctrlkitModule)
	}
	return abs, nil
}

// projectName is the last element of the module path that is not a major
// version suffix, lower case, with runs of other characters than letters,
// digits and '-' turned to '-': example.com/Foo_Operator/v2 is
// foo-operator.
func projectName(mod string) string {
	prefix, _, ok := module.SplitPathVersion(mod)
	if !ok {
		prefix = mod
	}
	name := strings.ToLower(path.Base(prefix))
	name = strings.Trim(nonName.ReplaceAllString(name, "-"), "-")
	if name == "" {
		return "operator"
	}
	return name
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// longestSuffix is the longest suffix config/ appends to the project's
// name for a Service or namespace name ("-metrics", "-webhook",
// "-system"), which must be DNS-1035 labels.
const longestSuffix = "-metrics"

// pluralize makes the resource name of a lower-case kind with the common
// English rules. The CRD and the kubebuilder:resource marker carry it, so
// controller-gen uses it as is.
func pluralize(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// ctrlkitVersion is the release of ctrlkit this binary was built from
// (go install github.com/ctrlkit/ctrlkit/cmd/ctrlkit@vX.Y.Z), or
// develVersion when it was built from a working tree. The command and the
// library are released together under one version, so the command's
// version is the library version a generated project requires.
func ctrlkitVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != commandModule || !semver.IsValid(bi.Main.Version) ||
		semver.Build(bi.Main.Version) != "" || module.IsPseudoVersion(bi.Main.Version) {
		return develVersion
	}
	return bi.Main.Version
}

// CtrlkitModule is ctrlkit's module path, for the templates.
func (p *project) CtrlkitModule() string { return ctrlkitModule }

// ReplacePath is CtrlkitReplace as go.mod spells it, quoted if need be.
func (p *project) ReplacePath() string { return modfile.AutoQuote(p.CtrlkitReplace) }
