package client

import "testing"

func TestCreateMergePatch(t *testing.T) {
	for _, tc := range []struct{ orig, mod, want string }{
		{`{"a":1}`, `{"a":1}`, `{}`},
		{`{"a":1}`, `{"a":2}`, `{"a":2}`},
		{`{"a":1}`, `{}`, `{"a":null}`},
		{`{}`, `{"a":{"b":1}}`, `{"a":{"b":1}}`},
		{`{"m":{"keep":1,"drop":2,"same":{"x":1}}}`, `{"m":{"keep":1,"add":3,"same":{"x":1}}}`, `{"m":{"add":3,"drop":null}}`},
		{`{"l":[1,2,3]}`, `{"l":[1,3]}`, `{"l":[1,3]}`},
		{`{"a":"s"}`, `{"a":{"b":1}}`, `{"a":{"b":1}}`},
		{`{"a":{"b":1}}`, `{"a":"s"}`, `{"a":"s"}`},
	} {
		got, err := createMergePatch([]byte(tc.orig), []byte(tc.mod))
		if err != nil || string(got) != tc.want {
			t.Errorf("createMergePatch(%s, %s) = %s, %v; want %s", tc.orig, tc.mod, got, err, tc.want)
		}
	}
	if _, err := createMergePatch([]byte(`[`), []byte(`{}`)); err == nil {
		t.Error("createMergePatch of invalid JSON succeeded")
	}
}
