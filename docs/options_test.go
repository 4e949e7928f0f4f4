package docs_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// optionsPage is the reference that TestOptionsReference holds to the code.
const optionsPage = "options.md"

// TestOptionsReference fails when options.md and the option structs of
// pkg/ disagree: a struct whose name ends in "Options" with no section, a
// section of a struct that is gone, an exported field with no row, a row
// of a field that is gone, or a type column that is not the field's type
// as written in the code. Structs of other names (webhook.Limits...) are
// held to the page once it has a section for them.
func TestOptionsReference(t *testing.T) {
	structs := parseStructs(t, filepath.Join("..", "pkg"))
	sections := parseOptionsPage(t, optionsPage)

	for name := range structs {
		if strings.HasSuffix(name, "Options") {
			if _, ok := sections[name]; !ok {
				t.Errorf("%s: no section %q: add \"## %s\" with a row for each of its fields", optionsPage, name, name)
			}
		}
	}
	for _, name := range sortedKeys(sections) {
		rows := sections[name]
		fields, ok := structs[name]
		if !ok {
			t.Errorf("%s: section %q names no exported struct of pkg/: remove it or rename it", optionsPage, name)
			continue
		}
		for _, f := range fields {
			typ, ok := rows[f.name]
			switch {
			case !ok:
				t.Errorf("%s: section %q has no row for field %s (%s)", optionsPage, name, f.name, f.typ)
			case typ != f.typ:
				t.Errorf("%s: section %q says field %s is %q; the code says %q", optionsPage, name, f.name, typ, f.typ)
			}
		}
		for _, field := range sortedKeys(rows) {
			if !hasField(fields, field) {
				t.Errorf("%s: section %q has a row for %s, which %s does not have", optionsPage, name, field, name)
			}
		}
	}
}

// field is an exported field of a struct, with its type as written.
type field struct{ name, typ string }

func hasField(fields []field, name string) bool {
	for _, f := range fields {
		if f.name == name {
			return true
		}
	}
	return false
}

// parseStructs returns the exported fields of every exported struct type
// in the non-test files of the packages directly under dir, keyed by
// "package.Type".
func parseStructs(t *testing.T, dir string) map[string][]field {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	structs := make(map[string][]field)
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					st, ok := ts.Type.(*ast.StructType)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					name := f.Name.Name + "." + ts.Name.Name
					fields := []field{} // a struct with no exported field still exists
					for _, fl := range st.Fields.List {
						var typ bytes.Buffer
						if err := printer.Fprint(&typ, fset, fl.Type); err != nil {
							t.Fatal(err)
						}
						names := fl.Names
						if len(names) == 0 { // embedded: the field is named after its type
							names = []*ast.Ident{embeddedName(fl.Type)}
						}
						for _, n := range names {
							if n != nil && n.IsExported() {
								fields = append(fields, field{n.Name, typ.String()})
							}
						}
					}
					structs[name] = fields
				}
			}
		}
	}
	if len(structs) == 0 {
		t.Fatalf("no structs found under %s", dir)
	}
	return structs
}

// embeddedName is the name of an embedded field of type expr.
func embeddedName(expr ast.Expr) *ast.Ident {
	switch e := expr.(type) {
	case *ast.Ident:
		return e
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel
	case *ast.IndexExpr:
		return embeddedName(e.X)
	case *ast.IndexListExpr:
		return embeddedName(e.X)
	}
	return nil
}

// parseOptionsPage reads the page's sections: a "## package.Type" heading
// followed by table rows "| `Field` | `type` | ... |". It returns each
// section's rows as field name to type.
func parseOptionsPage(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := make(map[string]map[string]string)
	var cur string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if h, ok := strings.CutPrefix(text, "## "); ok {
			cur = strings.Trim(strings.TrimSpace(h), "`")
			if !strings.Contains(cur, ".") {
				t.Errorf("%s:%d: heading %q is not package.Type", path, line, h)
			}
			if _, dup := sections[cur]; dup {
				t.Errorf("%s:%d: second section %q", path, line, cur)
			}
			sections[cur] = make(map[string]string)
			continue
		}
		if !strings.HasPrefix(text, "| `") {
			continue // prose, the header row or the separator row
		}
		if cur == "" {
			t.Errorf("%s:%d: table row before the first section", path, line)
			continue
		}
		cells := strings.Split(text, "|")
		if len(cells) != 6 { // "", field, type, zero value, meaning, ""
			t.Errorf("%s:%d: want 4 cells (field, type, zero value, meaning), got %d", path, line, len(cells)-2)
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		typ := strings.Trim(strings.TrimSpace(cells[2]), "`")
		if _, dup := sections[cur][name]; dup {
			t.Errorf("%s:%d: second row for %s in %q", path, line, name, cur)
		}
		sections[cur][name] = typ
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(sections) == 0 {
		t.Fatalf("%s has no sections", path)
	}
	return sections
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
