package webhook

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// patchOp is one operation of an RFC 6902 JSON patch. The diff produces
// add, remove and replace only.
type patchOp struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is the JSON value of add and replace (it may be null), nil for
	// remove.
	Value json.RawMessage `json:"value,omitempty"`
}

// absent stands for a member a JSON object does not have.
type absent struct{}

// jsonPatch returns the JSON patch that turns the document original into
// the same document with the changes that turned before into after. before
// is original as the Go type sees it (decoded and encoded again, so without
// the fields the type does not know and with the zero-valued ones it always
// writes); after is before once a Defaulter has changed it. Only what
// differs between before and after is patched, on original's paths, so
// fields the Go type drops are left alone and nothing is written that
// Default did not change. With before equal to original it is a plain diff
// of original and after (diffJSON).
//
// The patch is minimal for objects: it names each changed member, down to
// the leaves. Arrays of the same length are diffed element by element; an
// array whose length changed is replaced whole (no moves, no inserts). An
// unchanged document yields no operations.
func jsonPatch(original, before, after []byte) ([]patchOp, error) {
	var r, o, d any
	for _, doc := range []struct {
		name string
		raw  []byte
		into *any
	}{{"original", original, &r}, {"before", before, &o}, {"after", after, &d}} {
		// utiljson keeps integers as int64, so no large number loses digits.
		if err := utiljson.Unmarshal(doc.raw, doc.into); err != nil {
			return nil, fmt.Errorf("decoding the %s document: %w", doc.name, err)
		}
	}
	var ops []patchOp
	if err := diffValue(&ops, "", r, o, d); err != nil {
		return nil, err
	}
	return ops, nil
}

// diffJSON returns the JSON patch that turns a into b.
func diffJSON(a, b []byte) ([]patchOp, error) { return jsonPatch(a, a, b) }

// diffValue appends to ops what turns r, at path, into r with the changes
// from o to d. Each of r, o and d may be absent.
func diffValue(ops *[]patchOp, path string, r, o, d any) error {
	if reflect.DeepEqual(o, d) {
		return nil
	}
	_, rAbsent := r.(absent)
	if _, ok := d.(absent); ok {
		if !rAbsent {
			*ops = append(*ops, patchOp{Op: "remove", Path: path})
		}
		return nil
	}
	if rAbsent {
		return appendValue(ops, "add", path, d)
	}
	switch dv := d.(type) {
	case map[string]any:
		rv, rOK := r.(map[string]any)
		ov, oOK := o.(map[string]any)
		if !rOK || !oOK {
			break
		}
		// Members only r has are fields the Go type drops: left alone.
		keys := slices.Collect(maps.Keys(dv))
		for k := range ov {
			if _, ok := dv[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := diffValue(ops, path+"/"+escapePointer(k), member(rv, k), member(ov, k), member(dv, k)); err != nil {
				return err
			}
		}
		return nil
	case []any:
		rv, rOK := r.([]any)
		ov, oOK := o.([]any)
		if !rOK || !oOK || len(rv) != len(dv) || len(ov) != len(dv) {
			break
		}
		for i := range dv {
			if err := diffValue(ops, path+"/"+strconv.Itoa(i), rv[i], ov[i], dv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return appendValue(ops, "replace", path, d)
}

func appendValue(ops *[]patchOp, op, path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the value at %q: %w", path, err)
	}
	*ops = append(*ops, patchOp{Op: op, Path: path, Value: raw})
	return nil
}

// member is m[k], or absent.
func member(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return absent{}
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901): "~"
// becomes "~0" and "/" becomes "~1", so a label key such as
// "app.kubernetes.io/name" is one reference token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
