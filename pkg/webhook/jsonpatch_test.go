package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestDiffJSON(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       string // the patch, as JSON
	}{
		{name: "equal", a: `{"a":1,"b":[1,2]}`, b: `{"b":[1,2],"a":1}`, want: `null`},
		{name: "replace a leaf", a: `{"a":{"b":1,"c":2}}`, b: `{"a":{"b":1,"c":3}}`,
			want: `[{"op":"replace","path":"/a/c","value":3}]`},
		{name: "add a member", a: `{"a":{}}`, b: `{"a":{"b":"x"}}`,
			want: `[{"op":"add","path":"/a/b","value":"x"}]`},
		{name: "add a whole object", a: `{}`, b: `{"spec":{"size":3}}`,
			want: `[{"op":"add","path":"/spec","value":{"size":3}}]`},
		{name: "remove a member", a: `{"a":1,"b":2}`, b: `{"a":1}`,
			want: `[{"op":"remove","path":"/b"}]`},
		{name: "members in order", a: `{"c":1,"a":1}`, b: `{"b":2,"c":2}`,
			want: `[{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":2},{"op":"replace","path":"/c","value":2}]`},
		{name: "null is a value", a: `{"a":1}`, b: `{"a":null}`,
			want: `[{"op":"replace","path":"/a","value":null}]`},
		{name: "type change", a: `{"a":{"b":1}}`, b: `{"a":[1]}`,
			want: `[{"op":"replace","path":"/a","value":[1]}]`},
		{name: "array of the same length, element by element", a: `{"c":[{"n":"x","p":"A"},{"n":"y"}]}`, b: `{"c":[{"n":"x","p":"A"},{"n":"y","p":"B"}]}`,
			want: `[{"op":"add","path":"/c/1/p","value":"B"}]`},
		{name: "array that grew, whole", a: `{"c":[1,2]}`, b: `{"c":[1,2,3]}`,
			want: `[{"op":"replace","path":"/c","value":[1,2,3]}]`},
		{name: "array that shrank, whole", a: `{"c":[1,2]}`, b: `{"c":[1]}`,
			want: `[{"op":"replace","path":"/c","value":[1]}]`},
		{name: "escaped member names", a: `{"labels":{}}`, b: `{"labels":{"app.kubernetes.io/name":"w","a~b":"c"}}`,
			want: `[{"op":"add","path":"/labels/app.kubernetes.io~1name","value":"w"},{"op":"add","path":"/labels/a~0b","value":"c"}]`},
		{name: "large integers keep their digits", a: `{"n":1}`, b: `{"n":9007199254740993}`,
			want: `[{"op":"replace","path":"/n","value":9007199254740993}]`},
		{name: "whole document", a: `[1]`, b: `{"a":1}`,
			want: `[{"op":"replace","path":"","value":{"a":1}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := diffJSON([]byte(tc.a), []byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("diff of %s and %s:\n got %s\nwant %s", tc.a, tc.b, got, tc.want)
			}
			checkApply(t, tc.a, ops, tc.b)
		})
	}
}

// TestJSONPatchThreeWay covers what a Defaulter's patch must leave alone:
// fields the Go type drops and fields it writes that the request did not
// have.
func TestJSONPatchThreeWay(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		original, before, after   string
		want, wantPatchedOriginal string
	}{
		{
			name:     "a field the Go type drops is kept",
			original: `{"spec":{"size":1,"unknown":true}}`,
			before:   `{"spec":{"size":1}}`,
			after:    `{"spec":{"size":2}}`,
			want:     `[{"op":"replace","path":"/spec/size","value":2}]`,
			// unknown survives
			wantPatchedOriginal: `{"spec":{"size":2,"unknown":true}}`,
		},
		{
			name:                "zero values the Go type writes are not added",
			original:            `{"metadata":{"name":"a"}}`,
			before:              `{"metadata":{"name":"a","creationTimestamp":null},"spec":{},"status":{}}`,
			after:               `{"metadata":{"name":"a","creationTimestamp":null},"spec":{"color":"red"},"status":{}}`,
			want:                `[{"op":"add","path":"/spec","value":{"color":"red"}}]`,
			wantPatchedOriginal: `{"metadata":{"name":"a"},"spec":{"color":"red"}}`,
		},
		{
			name:                "a zero value omitted by the Go type is replaced",
			original:            `{"spec":{"size":0}}`,
			before:              `{"spec":{}}`,
			after:               `{"spec":{"size":3}}`,
			want:                `[{"op":"replace","path":"/spec/size","value":3}]`,
			wantPatchedOriginal: `{"spec":{"size":3}}`,
		},
		{
			name:                "a member removed by Default that the original lacks",
			original:            `{"a":1}`,
			before:              `{"a":1,"b":{}}`,
			after:               `{"a":1}`,
			want:                `null`,
			wantPatchedOriginal: `{"a":1}`,
		},
		{
			name:                "unchanged",
			original:            `{"a":1,"x":2}`,
			before:              `{"a":1,"z":null}`,
			after:               `{"a":1,"z":null}`,
			want:                `null`,
			wantPatchedOriginal: `{"a":1,"x":2}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := jsonPatch([]byte(tc.original), []byte(tc.before), []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch:\n got %s\nwant %s", got, tc.want)
			}
			checkApply(t, tc.original, ops, tc.wantPatchedOriginal)
		})
	}
}

func TestDiffJSONInvalid(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{`{`, `{}`, "decoding the original document"},
		{`{}`, `{"a":`, "decoding the after document"},
	} {
		if _, err := diffJSON([]byte(tc.a), []byte(tc.b)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("diffJSON(%s, %s) = %v, want an error containing %q", tc.a, tc.b, err, tc.want)
		}
	}
}

// TestDiffJSONRandom diffs random documents against random changes of them:
// applying the patch to the first must give the second, and a document
// diffed against itself gives no patch.
func TestDiffJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := randomValue(rng, 4)
		if _, ok := a.(map[string]any); !ok && i%2 == 0 {
			a = map[string]any{"root": a}
		}
		b := mutate(rng, deepCopy(a), 3)
		aj, bj := mustJSON(t, a), mustJSON(t, b)
		ops, err := diffJSON(aj, bj)
		if err != nil {
			t.Fatalf("diffJSON(%s, %s): %v", aj, bj, err)
		}
		checkApply(t, string(aj), ops, string(bj))
		// Minimal: without any one of its operations the patch falls short.
		for j := range ops {
			fewer, err := applyPatch(decode(t, aj), mustJSON(t, append(ops[:j:j], ops[j+1:]...)))
			if err == nil && reflect.DeepEqual(fewer, decode(t, bj)) {
				t.Fatalf("diff of %s and %s: operation %d of %s is not needed", aj, bj, j, mustJSON(t, ops))
			}
		}
		if self, err := diffJSON(aj, aj); err != nil || len(self) != 0 {
			t.Fatalf("diffJSON of %s with itself = %v, %v; want no operations", aj, self, err)
		}
	}
}

// checkApply applies ops to doc and checks the result equals want.
func checkApply(t *testing.T, doc string, ops []patchOp, want string) {
	t.Helper()
	v, w := decode(t, []byte(doc)), decode(t, []byte(want))
	// Through JSON, as the API server receives the patch.
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	got, err := applyPatch(v, raw)
	if err != nil {
		t.Fatalf("applying %s to %s: %v", raw, doc, err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("applying %s to %s gives %s, want %s", raw, doc, mustJSON(t, got), want)
	}
}

// applyPatch is a small RFC 6902 applier of add, remove and replace, written
// apart from the diff to check it.
func applyPatch(doc any, patch []byte) (any, error) {
	var ops []map[string]json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		var kind, path string
		if err := json.Unmarshal(op["op"], &kind); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(op["path"], &path); err != nil {
			return nil, err
		}
		var value any
		if kind != "remove" {
			raw, ok := op["value"]
			if !ok {
				return nil, fmt.Errorf("%s %q has no value", kind, path)
			}
			if err := utiljson.Unmarshal(raw, &value); err != nil {
				return nil, err
			}
		}
		var err error
		if doc, err = applyOp(doc, kind, path, value); err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, path, err)
		}
	}
	return doc, nil
}

func applyOp(doc any, kind, path string, value any) (any, error) {
	if path == "" {
		if kind == "remove" {
			return nil, fmt.Errorf("cannot remove the whole document")
		}
		return value, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path does not start with /")
	}
	tokens := strings.Split(path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	parent := doc
	for _, tok := range tokens[:len(tokens)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("no member %q", tok)
			}
			parent = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(p) {
				return nil, fmt.Errorf("no element %q", tok)
			}
			parent = p[i]
		default:
			return nil, fmt.Errorf("%q is inside a scalar", tok)
		}
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		_, exists := p[last]
		switch {
		case kind == "add":
			p[last] = value
		case !exists:
			return nil, fmt.Errorf("no member %q to %s", last, kind)
		case kind == "remove":
			delete(p, last)
		default:
			p[last] = value
		}
	case []any:
		// The diff never adds to or removes from an array (it replaces a
		// changed array whole), so only replace is supported.
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(p) || kind != "replace" {
			return nil, fmt.Errorf("unsupported %s of element %q", kind, last)
		}
		p[i] = value
	default:
		return nil, fmt.Errorf("%q is inside a scalar", last)
	}
	return doc, nil
}

func decode(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	if err := utiljson.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var keys = []string{"a", "b", "c", "x/y", "t~", "spec"}

func randomValue(rng *rand.Rand, depth int) any {
	n := rng.IntN(7)
	if depth == 0 {
		n = rng.IntN(4)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return int64(rng.IntN(5))
	case 3:
		return strconv.Itoa(rng.IntN(3))
	case 4:
		return 1.5
	case 5:
		arr := make([]any, rng.IntN(4))
		for i := range arr {
			arr[i] = randomValue(rng, depth-1)
		}
		return arr
	default:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[keys[rng.IntN(len(keys))]] = randomValue(rng, depth-1)
		}
		return m
	}
}

// mutate changes v in place at random (or returns a new value) and
// returns it.
func mutate(rng *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		for k := range x {
			switch rng.IntN(5) {
			case 0:
				delete(x, k)
			case 1:
				x[k] = mutate(rng, x[k], depth-1)
			}
		}
		if rng.IntN(3) == 0 {
			x[keys[rng.IntN(len(keys))]] = randomValue(rng, depth)
		}
		return x
	case []any:
		switch rng.IntN(4) {
		case 0:
			return append(x, randomValue(rng, depth))
		case 1:
			if len(x) > 0 {
				return x[1:]
			}
		}
		for i := range x {
			if rng.IntN(2) == 0 {
				x[i] = mutate(rng, x[i], depth-1)
			}
		}
		return x
	}
	if rng.IntN(2) == 0 {
		return randomValue(rng, depth)
	}
	return v
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
