package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The patch types kube-apiserver accepts, in the order its 415 answer
// names them: strategic merge patch only for built-in kinds.
var (
	customPatchTypes  = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
	builtinPatchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)}
)

// patchTypeFor returns the patch type of a Content-Type, or a 415 error
// naming the types r accepts.
func patchTypeFor(r *resource, contentType string) (types.PatchType, error) {
	ct, _, _ := strings.Cut(contentType, ";")
	accepted := customPatchTypes
	if r.builtin {
		accepted = builtinPatchTypes
	}
	for _, t := range accepted {
		if strings.TrimSpace(ct) == t {
			return types.PatchType(t), nil
		}
	}
	return "", &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", "),
	}}
}

// applyPatch applies a JSON, merge or strategic merge patch to the JSON
// document original, with kube-apiserver's error codes: 400 for a patch
// that cannot be decoded, 422 for one that cannot be applied.
func applyPatch(r *resource, pt types.PatchType, original, patch []byte) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		var ops []jsonPatchOp
		if err := json.Unmarshal(patch, &ops); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		doc, err := decodeJSON(original)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for i, op := range ops {
			if doc, err = op.apply(doc); err != nil {
				return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", fmt.Sprintf("json patch operation %d (%s %s): %v", i, op.Op, op.Path, err), 0, false)
			}
		}
		return json.Marshal(doc)
	case types.MergePatchType:
		p, err := decodeJSON(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		if _, ok := p.(map[string]any); !ok {
			return nil, apierrors.NewBadRequest("invalid JSON document: a merge patch must be a JSON object")
		}
		doc, err := decodeJSON(original)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return json.Marshal(mergePatch(doc, p))
	case types.StrategicMergePatchType:
		out, err := strategicpatch.StrategicMergePatch(original, patch, r.new())
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		default:
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("unsupported patch type %q", pt))
}

// decodeJSON decodes a JSON document keeping numbers exact.
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("invalid JSON document: data after the top-level value")
	}
	return v, nil
}

// mergePatch applies the JSON merge patch (RFC 7386) patch to doc: objects
// merge key by key, null deletes, anything else (lists too) replaces.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
		} else {
			d[k] = mergePatch(d[k], v)
		}
	}
	return d
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from"`
	Value json.RawMessage `json:"value"`
}

// apply applies the operation to doc and returns the new document.
func (op jsonPatchOp) apply(doc any) (any, error) {
	path, err := pointer(op.Path)
	if err != nil {
		return nil, err
	}
	value := func() (any, error) {
		if op.Value == nil {
			return nil, errors.New("missing value")
		}
		return decodeJSON(op.Value)
	}
	switch op.Op {
	case "add", "replace":
		v, err := value()
		if err != nil {
			return nil, err
		}
		return set(doc, path, v, op.Op == "add")
	case "remove":
		doc, _, err := remove(doc, path)
		return doc, err
	case "test":
		v, err := value()
		if err != nil {
			return nil, err
		}
		got, err := get(doc, path)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(got, v) {
			return nil, errors.New("test failed: the value differs")
		}
		return doc, nil
	case "move", "copy":
		from, err := pointer(op.From)
		if err != nil {
			return nil, err
		}
		var v any
		if op.Op == "move" {
			if strings.HasPrefix(op.Path, op.From+"/") {
				return nil, errors.New("cannot move a value into itself")
			}
			doc, v, err = remove(doc, from)
		} else {
			v, err = get(doc, from)
			if err == nil {
				v, err = deepCopyJSON(v)
			}
		}
		if err != nil {
			return nil, err
		}
		return set(doc, path, v, true)
	}
	return nil, fmt.Errorf("unknown operation %q", op.Op)
}

// pointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// index parses a list index token; "-" (the end) only when adding.
func index(token string, n int, adding bool) (int, error) {
	if token == "-" && adding {
		return n, nil
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || i > n || (i == n && !adding) || (len(token) > 1 && token[0] == '0') {
		return 0, fmt.Errorf("index %q out of range", token)
	}
	return i, nil
}

func get(doc any, path []string) (any, error) {
	for _, t := range path {
		switch d := doc.(type) {
		case map[string]any:
			v, ok := d[t]
			if !ok {
				return nil, fmt.Errorf("missing key %q", t)
			}
			doc = v
		case []any:
			i, err := index(t, len(d), false)
			if err != nil {
				return nil, err
			}
			doc = d[i]
		default:
			return nil, fmt.Errorf("cannot look up %q in a scalar", t)
		}
	}
	return doc, nil
}

// set adds (insert into lists, create keys) or replaces (the target must
// exist) the value at path, and returns the new document.
func set(doc any, path []string, v any, add bool) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	return edit(doc, path, func(parent any, t string) (any, error) {
		switch d := parent.(type) {
		case map[string]any:
			if _, ok := d[t]; !ok && !add {
				return nil, fmt.Errorf("missing key %q", t)
			}
			d[t] = v
			return d, nil
		case []any:
			i, err := index(t, len(d), add)
			if err != nil {
				return nil, err
			}
			if !add {
				d[i] = v
				return d, nil
			}
			return append(d[:i], append([]any{v}, d[i:]...)...), nil
		}
		return nil, fmt.Errorf("cannot set %q in a scalar", t)
	})
}

// remove removes the value at path, and returns the new document and the
// value.
func remove(doc any, path []string) (any, any, error) {
	if len(path) == 0 {
		return nil, nil, errors.New("cannot remove the whole document")
	}
	var removed any
	doc, err := edit(doc, path, func(parent any, t string) (any, error) {
		switch d := parent.(type) {
		case map[string]any:
			v, ok := d[t]
			if !ok {
				return nil, fmt.Errorf("missing key %q", t)
			}
			removed = v
			delete(d, t)
			return d, nil
		case []any:
			i, err := index(t, len(d), false)
			if err != nil {
				return nil, err
			}
			removed = d[i]
			return append(d[:i:i], d[i+1:]...), nil
		}
		return nil, fmt.Errorf("cannot remove %q from a scalar", t)
	})
	return doc, removed, err
}

// edit applies fn to the parent of the value at path (non-empty) and the
// last token, and returns doc with the parent replaced by fn's result.
func edit(doc any, path []string, fn func(parent any, token string) (any, error)) (any, error) {
	if len(path) == 1 {
		return fn(doc, path[0])
	}
	t := path[0]
	switch d := doc.(type) {
	case map[string]any:
		child, ok := d[t]
		if !ok {
			return nil, fmt.Errorf("missing key %q", t)
		}
		child, err := edit(child, path[1:], fn)
		if err != nil {
			return nil, err
		}
		d[t] = child
		return d, nil
	case []any:
		i, err := index(t, len(d), false)
		if err != nil {
			return nil, err
		}
		child, err := edit(d[i], path[1:], fn)
		if err != nil {
			return nil, err
		}
		d[i] = child
		return d, nil
	}
	return nil, fmt.Errorf("cannot look up %q in a scalar", t)
}

func deepCopyJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(data)
}
