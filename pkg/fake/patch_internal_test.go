package fake

import (
	"encoding/json"
	"testing"
)

// TestJSONPatch checks the JSON patch (RFC 6902) operations, mostly with
// the RFC's own examples (appendix A).
func TestJSONPatch(t *testing.T) {
	for _, tc := range []struct {
		name, doc, patch, want string // want "" means the patch must fail
	}{
		{"add a key", `{"foo":"bar"}`, `[{"op":"add","path":"/baz","value":"qux"}]`, `{"baz":"qux","foo":"bar"}`},
		{"add into a list", `{"foo":["bar","baz"]}`, `[{"op":"add","path":"/foo/1","value":"qux"}]`, `{"foo":["bar","qux","baz"]}`},
		{"add at the end", `{"foo":["bar"]}`, `[{"op":"add","path":"/foo/-","value":["abc"]}]`, `{"foo":["bar",["abc"]]}`},
		{"add null", `{}`, `[{"op":"add","path":"/a","value":null}]`, `{"a":null}`},
		{"add replaces the document", `{"a":1}`, `[{"op":"add","path":"","value":[1]}]`, `[1]`},
		{"remove a key", `{"baz":"qux","foo":"bar"}`, `[{"op":"remove","path":"/baz"}]`, `{"foo":"bar"}`},
		{"remove from a list", `{"foo":["bar","qux","baz"]}`, `[{"op":"remove","path":"/foo/1"}]`, `{"foo":["bar","baz"]}`},
		{"replace", `{"baz":"qux","foo":"bar"}`, `[{"op":"replace","path":"/baz","value":"boo"}]`, `{"baz":"boo","foo":"bar"}`},
		{"move", `{"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}`, `[{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]`,
			`{"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}`},
		{"move in a list", `{"foo":["all","grass","cows","eat"]}`, `[{"op":"move","from":"/foo/1","path":"/foo/3"}]`, `{"foo":["all","cows","eat","grass"]}`},
		{"copy", `{"a":{"b":[1]}}`, `[{"op":"copy","from":"/a","path":"/c"},{"op":"add","path":"/c/b/-","value":2}]`, `{"a":{"b":[1]},"c":{"b":[1,2]}}`},
		{"test passes", `{"baz":"qux","foo":["a",2,"c"]}`, `[{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]`, `{"baz":"qux","foo":["a",2,"c"]}`},
		{"escaped keys", `{"a/b":1,"m~n":2}`, `[{"op":"replace","path":"/a~1b","value":3},{"op":"remove","path":"/m~0n"}]`, `{"a/b":3}`},
		{"exact numbers", `{"n":9007199254740993}`, `[{"op":"add","path":"/m","value":9007199254740995}]`, `{"m":9007199254740995,"n":9007199254740993}`},
		{"test fails", `{"baz":"qux"}`, `[{"op":"test","path":"/baz","value":"bar"}]`, ""},
		{"replace a missing key", `{}`, `[{"op":"replace","path":"/a","value":1}]`, ""},
		{"remove a missing key", `{}`, `[{"op":"remove","path":"/a"}]`, ""},
		{"add to a missing parent", `{"q":{"bar":2}}`, `[{"op":"add","path":"/a/b","value":1}]`, ""},
		{"index out of range", `{"foo":[1]}`, `[{"op":"add","path":"/foo/2","value":1}]`, ""},
		{"leading zero", `{"foo":[1,2]}`, `[{"op":"remove","path":"/foo/01"}]`, ""},
		{"move into itself", `{"a":{"b":1}}`, `[{"op":"move","from":"/a","path":"/a/c"}]`, ""},
		{"no value", `{}`, `[{"op":"add","path":"/a"}]`, ""},
		{"unknown op", `{}`, `[{"op":"frob","path":"/a"}]`, ""},
		{"bad path", `{}`, `[{"op":"add","path":"a","value":1}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyPatch(nil, "application/json-patch+json", []byte(tc.doc), []byte(tc.patch))
			if tc.want == "" {
				if err == nil {
					t.Errorf("patch succeeded with %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestMergePatch checks JSON merge patch (RFC 7386) with the RFC's
// examples (appendix A).
func TestMergePatch(t *testing.T) {
	for _, tc := range [][3]string{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		got, err := applyPatch(nil, "application/merge-patch+json", []byte(tc[0]), []byte(tc[1]))
		if err != nil {
			t.Errorf("%s + %s: %v", tc[0], tc[1], err)
			continue
		}
		if !jsonEqual(t, got, tc[2]) {
			t.Errorf("%s + %s = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
	if _, err := applyPatch(nil, "application/merge-patch+json", []byte(`{}`), []byte(`["not an object"]`)); err == nil {
		t.Error("a merge patch that is not an object succeeded")
	}
}

// jsonEqual compares exactly: results are encoded with sorted keys and
// numbers as sent, and so are the wanted documents.
func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("result %s is not JSON", got)
	}
	return string(got) == want
}
