package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// goBuild is the go build command of a Dockerfile's build stage.
type goBuild struct {
	Env    []string // the assignments before go, NAME=value
	Args   []string // after "go build"
	Output string   // the value of -o
}

// parseGoBuild finds the one RUN instruction of dockerfile that runs go
// build and splits it as the shell would, with args giving the values of
// ${NAME} and ${NAME:-default} (an unset or empty NAME takes the default).
func parseGoBuild(dockerfile []byte, args map[string]string) (goBuild, error) {
	var runs []string
	lines := strings.Split(strings.ReplaceAll(string(dockerfile), "\\\n", " "), "\n")
	for _, l := range lines {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(l), "RUN "); ok && strings.Contains(cmd, "go build") {
			runs = append(runs, cmd)
		}
	}
	if len(runs) != 1 {
		return goBuild{}, fmt.Errorf("want one RUN instruction with go build, found %d: %q", len(runs), runs)
	}
	words, err := shellWords(runs[0], args)
	if err != nil {
		return goBuild{}, fmt.Errorf("%q: %w", runs[0], err)
	}
	var b goBuild
	for len(words) > 0 && isAssignment(words[0]) {
		b.Env, words = append(b.Env, words[0]), words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		return goBuild{}, fmt.Errorf("%q: want [NAME=value...] go build ..., got %q", runs[0], words)
	}
	b.Args = words[2:]
	for i, a := range b.Args {
		if a == "-o" && i+1 < len(b.Args) {
			b.Output = b.Args[i+1]
		}
	}
	if b.Output == "" {
		return goBuild{}, fmt.Errorf("%q: no -o", runs[0])
	}
	return b, nil
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == ""
}

// shellWords splits s into words as a POSIX shell does for the forms a
// Dockerfile's build line uses: blanks, single and double quotes, and
// ${NAME}, ${NAME:-default} and $NAME expanded from vars. Anything else
// that would make the shell do more (a pipe, a subshell, a glob) is an
// error, so a build line the test does not understand fails it.
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, single, double := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case single:
			if c == '\'' {
				single = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' && !double:
			single, inWord = true, true
		case c == '"':
			double, inWord = !double, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '$':
			name, def, n, err := variable(s[i:])
			if err != nil {
				return nil, err
			}
			v := vars[name]
			if v == "" {
				v = def
			}
			cur.WriteString(v)
			i += n - 1
			inWord = true
		case (c == ' ' || c == '\t') && !double:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case !double && strings.IndexByte("|&;<>()`*?[]{}~#", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q is not understood by this test", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if single || double {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// variable parses the expansion at the start of s ("$NAME", "${NAME}" or
// "${NAME:-default}") and returns its name, default and length.
func variable(s string) (name, def string, n int, err error) {
	if strings.HasPrefix(s, "${") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", "", 0, errors.New("unterminated ${")
		}
		name, def, _ = strings.Cut(s[2:end], ":-")
		return name, def, end + 1, nil
	}
	n = 1
	for n < len(s) && (s[n] == '_' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	if n == 1 {
		return "", "", 0, errors.New("a lone $")
	}
	return s[1:n], "", n, nil
}

// dockerBuildArgs are the build arguments BuildKit gives a build of a
// Linux image for this machine's architecture.
var dockerBuildArgs = map[string]string{"TARGETOS": "linux", "TARGETARCH": runtime.GOARCH}

func TestParseGoBuild(t *testing.T) {
	for _, tc := range []struct {
		name, dockerfile string
		want             goBuild
		wantErr          string
	}{
		{"plain", "FROM x\nRUN CGO_ENABLED=0 go build -o app .\n",
			goBuild{Env: []string{"CGO_ENABLED=0"}, Args: []string{"-o", "app", "."}, Output: "app"}, ""},
		{"quotes and defaults", "RUN CGO_ENABLED=0 GOOS=${NOPE:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags=\"-s -w\" -o 'my app' .",
			goBuild{Env: []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH}, Args: []string{"-trimpath", "-ldflags=-s -w", "-o", "my app", "."}, Output: "my app"}, ""},
		{"continued lines", "RUN CGO_ENABLED=0 \\\n  go build \\\n  -o manager .",
			goBuild{Env: []string{"CGO_ENABLED=0"}, Args: []string{"-o", "manager", "."}, Output: "manager"}, ""},
		{"no build", "FROM x\nRUN go mod download\n", goBuild{}, "found 0"},
		{"two builds", "RUN go build -o a .\nRUN go build -o b .\n", goBuild{}, "found 2"},
		{"a pipe", "RUN go build -o a . | tee log", goBuild{}, "not understood"},
		{"no -o", "RUN go build .", goBuild{}, "no -o"},
		{"something else first", "RUN cd x && go build -o a .", goBuild{}, "not understood"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseGoBuild([]byte(tc.dockerfile), dockerBuildArgs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Env, tc.want.Env) || !slices.Equal(got.Args, tc.want.Args) || got.Output != tc.want.Output {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDockerfile checks the generated Dockerfile's promises that need no
// container engine: a static, trimmed, stripped build, and a distroless
// non-root image that runs what was built. TestNewProjectE2E builds the
// binary with the same line and checks it is statically linked.
func TestDockerfile(t *testing.T) {
	p, err := newProject(NewOptions{Module: "example.com/x-operator", Group: "x.example.com", Version: "v1", Kind: "X", Template: templateMinimal, Dir: filepath.Join(t.TempDir(), "x")})
	if err != nil {
		t.Fatal(err)
	}
	files, err := render(p)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f file) bool { return f.Path == "Dockerfile" })
	if i < 0 {
		t.Fatal("no Dockerfile")
	}
	dockerfile := files[i].Data
	b, err := parseGoBuild(dockerfile, dockerBuildArgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH} {
		if !slices.Contains(b.Env, want) {
			t.Errorf("build env %q lacks %s", b.Env, want)
		}
	}
	for _, want := range []string{"-trimpath", "-ldflags=-s -w"} {
		if !slices.Contains(b.Args, want) {
			t.Errorf("go build %q lacks %s", b.Args, want)
		}
	}
	stages := strings.Split(string(dockerfile), "\nFROM ")
	final := stages[len(stages)-1]
	for _, want := range []string{
		"gcr.io/distroless/static:nonroot\n",
		"\nCOPY --from=builder /workspace/" + b.Output + " .\n",
		"\nUSER 65532:65532\n",
		"\nENTRYPOINT [\"/" + b.Output + "\"]\n",
	} {
		if !strings.Contains(final, want) {
			t.Errorf("the run stage lacks %q:\nFROM %s", want, final)
		}
	}
	// What the build stage copies from the context, .dockerignore lets
	// through.
	var copied []string
	for _, l := range strings.Split(string(dockerfile), "\n") {
		if args, ok := strings.CutPrefix(l, "COPY "); ok && !strings.HasPrefix(args, "--from=") {
			f := strings.Fields(args)
			copied = append(copied, f[:len(f)-1]...)
		}
	}
	if want := []string{"go.mod", "go.sum", "main.go", "api/", "internal/"}; !slices.Equal(copied, want) {
		t.Errorf("the build stage copies %q, want %q", copied, want)
	}
	ignore := string(files[slices.IndexFunc(files, func(f file) bool { return f.Path == ".dockerignore" })].Data)
	for _, c := range copied {
		if !strings.Contains(ignore, "\n!"+c+"\n") {
			t.Errorf(".dockerignore does not let %s through:\n%s", c, ignore)
		}
	}
}

// buildAsDockerfile builds the project in dir with the go build line of
// its Dockerfile, flags and environment as they are, and returns the
// binary's path.
func buildAsDockerfile(t *testing.T, dir string, env []string) string {
	t.Helper()
	b, err := parseGoBuild(mustRead(t, filepath.Join(dir, "Dockerfile")), dockerBuildArgs)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(b.Output))
	args := slices.Clone(b.Args)
	args[slices.Index(args, "-o")+1] = out
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(env), b.Env...) // the Dockerfile's settings win
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", strings.Join(b.Env, " "), strings.Join(cmd.Args, " "), dir, err, output)
	}
	t.Logf("built %s with %s go build %s", out, strings.Join(b.Env, " "), strings.Join(b.Args, " "))
	return out
}

// staticProblems returns what keeps the ELF binary at path from being
// what the Dockerfile promises: statically linked (no interpreter, no
// dynamic section, no needed libraries), stripped (no symbol table) and
// free of the build directory's path (-trimpath). None means it is.
func staticProblems(path, buildDir string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var problems []string
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			problems = append(problems, "a PT_INTERP program header: it is dynamically linked")
		case elf.PT_DYNAMIC:
			problems = append(problems, "a PT_DYNAMIC program header: it is dynamically linked")
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		problems = append(problems, "a .dynamic section")
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		problems = append(problems, fmt.Sprintf("needs shared libraries %q (err %v)", libs, err))
	}
	if s := f.Section(".symtab"); s != nil {
		problems = append(problems, "a symbol table: not built with -ldflags=-s")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if buildDir != "" && bytes.Contains(data, []byte(buildDir)) {
		problems = append(problems, "holds its build directory "+buildDir+": not built with -trimpath")
	}
	return problems, nil
}

// TestStaticProblemsSeesADynamicBinary is the control of staticProblems:
// a dynamically linked system binary has problems.
func TestStaticProblemsSeesADynamicBinary(t *testing.T) {
	const dynamic = "/bin/ls"
	if _, err := os.Stat(dynamic); err != nil || runtime.GOOS != "linux" {
		t.Skipf("needs %s, an ELF binary linked dynamically, as on most Linux systems", dynamic)
	}
	problems, err := staticProblems(dynamic, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "PT_INTERP") }) ||
		!slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "needs shared libraries") }) {
		t.Errorf("staticProblems(%s) = %q, want an interpreter and shared libraries", dynamic, problems)
	}
}
