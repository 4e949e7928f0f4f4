package applydiff

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// fieldSet is the union of managedFields' fieldsV1 trees: keys "f:name"
// (a field), "k:{...}" (a list item by its keys), "v:value" (a set item),
// "i:n" (a list item by index) and "." (the node itself).
type fieldSet map[string]any

// ownedFields is the union of the fields every manager of obj owns.
func ownedFields(obj map[string]any) fieldSet {
	set := fieldSet{}
	if obj == nil {
		return set
	}
	md, _ := obj["metadata"].(map[string]any)
	mf, _ := md["managedFields"].([]any)
	for _, e := range mf {
		if f, ok := e.(map[string]any)["fieldsV1"].(map[string]any); ok {
			union(set, f)
		}
	}
	return set
}

func union(dst, src map[string]any) {
	for k, v := range src {
		sv, _ := v.(map[string]any)
		dv, ok := dst[k].(map[string]any)
		if !ok {
			dv = map[string]any{}
			dst[k] = dv
		}
		union(dv, sv)
	}
}

// filter returns the part of obj in the set, with the object's name,
// namespace and managedFields.
func (s fieldSet) filter(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	out, _ := pick(obj, s).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	md, _ := obj["metadata"].(map[string]any)
	omd, _ := out["metadata"].(map[string]any)
	if omd == nil {
		omd = map[string]any{}
		out["metadata"] = omd
	}
	for _, k := range []string{"name", "namespace", "managedFields"} {
		if v, ok := md[k]; ok {
			omd[k] = v
		}
	}
	return out
}

// pick returns the part of v that fields names; a leaf (no children)
// takes the whole value.
func pick(v any, fields map[string]any) any {
	children := 0
	for k := range fields {
		if k != "." {
			children++
		}
	}
	if children == 0 {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, sub := range fields {
			name, ok := strings.CutPrefix(k, "f:")
			if !ok {
				continue
			}
			if fv, ok := x[name]; ok {
				m, _ := sub.(map[string]any)
				out[name] = pick(fv, m)
			}
		}
		return out
	case []any:
		var out []any
		for i, item := range x {
			for k, sub := range fields {
				if matches(k, i, item) {
					m, _ := sub.(map[string]any)
					out = append(out, pick(item, m))
					break
				}
			}
		}
		return out
	}
	return v
}

// matches reports whether the list item at index i is the one the key
// names.
func matches(key string, i int, item any) bool {
	switch {
	case strings.HasPrefix(key, "k:"):
		var keys map[string]any
		if json.Unmarshal([]byte(key[2:]), &keys) != nil {
			return false
		}
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		for k, want := range keys {
			if !sameJSON(m[k], want) {
				return false
			}
		}
		return true
	case strings.HasPrefix(key, "v:"):
		var want any
		return json.Unmarshal([]byte(key[2:]), &want) == nil && sameJSON(item, want)
	case strings.HasPrefix(key, "i:"):
		n, err := strconv.Atoi(key[2:])
		return err == nil && n == i
	}
	return false
}

// sameJSON compares two decoded JSON values, numbers by value.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}
