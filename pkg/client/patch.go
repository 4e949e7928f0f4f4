package client

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Patch is a patch computed from the object being patched. Build one with
// MergeFrom, StrategicMergeFrom, JSONPatch or RawPatch.
type Patch interface {
	// Type is the patch's content type.
	Type() types.PatchType
	// Data returns the patch for obj.
	Data(obj Object) ([]byte, error)
}

// Lock says whether a patch computed from an original object carries its
// resourceVersion.
type Lock bool

// The two kinds of Lock.
const (
	// NoLock: the patch changes only the fields that differ, and succeeds
	// whatever else changed on the server since the original was read.
	NoLock Lock = false
	// OptimisticLock: the patch carries the original's resourceVersion and
	// fails with a conflict (apierrors.IsConflict) if the object changed
	// since.
	OptimisticLock Lock = true
)

// MergeFrom returns a JSON merge patch (RFC 7386) from original to the
// object patched: take a DeepCopy of the object, change the copy, and
// Patch it with MergeFrom(original, NoLock). Lists are replaced whole.
func MergeFrom(original Object, lock Lock) Patch {
	return fromOriginal{pt: types.MergePatchType, original: original, lock: lock}
}

// StrategicMergeFrom returns a strategic merge patch from original to the
// object patched, for client-go's built-in types only: lists such as a
// pod's containers are merged by key, not replaced. lock works as for
// MergeFrom.
func StrategicMergeFrom(original Object, lock Lock) Patch {
	return fromOriginal{pt: types.StrategicMergePatchType, original: original, lock: lock}
}

// fromOriginal is a two-way patch of type pt from original to the object
// patched.
type fromOriginal struct {
	pt       types.PatchType
	original Object
	lock     Lock
}

func (p fromOriginal) Type() types.PatchType { return p.pt }

func (p fromOriginal) Data(obj Object) ([]byte, error) {
	orig, mod, err := marshalPair(p.original, obj, p.lock)
	if err != nil {
		return nil, err
	}
	var data []byte
	if p.pt == types.StrategicMergePatchType {
		data, err = strategicpatch.CreateTwoWayMergePatch(orig, mod, obj)
	} else {
		data, err = createMergePatch(orig, mod)
	}
	if err != nil {
		return nil, fmt.Errorf("client: computing the %s patch of %T %s: %w", p.pt, obj, keyOf(obj), err)
	}
	return data, nil
}

// createMergePatch returns the JSON merge patch (RFC 7386) that turns the
// JSON object orig into mod: the members that differ, with null for those
// mod lacks; objects are compared member by member, anything else whole.
func createMergePatch(orig, mod []byte) ([]byte, error) {
	var o, m map[string]any
	if err := json.Unmarshal(orig, &o); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mod, &m); err != nil {
		return nil, err
	}
	return json.Marshal(mergeDiff(o, m))
}

func mergeDiff(orig, mod map[string]any) map[string]any {
	patch := map[string]any{}
	for k := range orig {
		if _, ok := mod[k]; !ok {
			patch[k] = nil
		}
	}
	for k, mv := range mod {
		ov, ok := orig[k]
		om, oIsMap := ov.(map[string]any)
		mm, mIsMap := mv.(map[string]any)
		switch {
		case ok && oIsMap && mIsMap:
			if d := mergeDiff(om, mm); len(d) > 0 {
				patch[k] = d
			}
		case !ok || !reflect.DeepEqual(ov, mv):
			patch[k] = mv
		}
	}
	return patch
}

// marshalPair encodes original and modified for a two-way patch; with
// lock, modified carries original's resourceVersion and original none,
// so the patch always includes it.
func marshalPair(original, modified Object, lock Lock) (orig, mod []byte, err error) {
	if original == nil {
		return nil, nil, fmt.Errorf("client: the original of the patch of %T %s is nil", modified, keyOf(modified))
	}
	if lock {
		o := original.DeepCopyObject().(Object)
		m := modified.DeepCopyObject().(Object)
		m.SetResourceVersion(original.GetResourceVersion())
		o.SetResourceVersion("")
		original, modified = o, m
	}
	if orig, err = json.Marshal(original); err != nil {
		return nil, nil, fmt.Errorf("client: encoding the original of %T %s: %w", original, keyOf(original), err)
	}
	if mod, err = json.Marshal(modified); err != nil {
		return nil, nil, fmt.Errorf("client: encoding %T %s: %w", modified, keyOf(modified), err)
	}
	return orig, mod, nil
}

// JSONPatchOp is one operation of a JSON patch (RFC 6902).
type JSONPatchOp struct {
	// Op is "add", "remove", "replace", "move", "copy" or "test".
	Op string `json:"op"`
	// Path is a JSON pointer such as "/metadata/labels/app".
	Path string `json:"path"`
	// Value is the value of add, replace and test.
	Value any `json:"value,omitempty"`
	// From is the source of move and copy.
	From string `json:"from,omitempty"`
}

// JSONPatch returns a JSON patch (RFC 6902) of ops. Its "test" operations
// make the patch fail unless the object holds the values tested.
func JSONPatch(ops ...JSONPatchOp) Patch { return jsonPatch(ops) }

type jsonPatch []JSONPatchOp

func (p jsonPatch) Type() types.PatchType { return types.JSONPatchType }

func (p jsonPatch) Data(Object) ([]byte, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("client: a JSON patch needs at least one operation")
	}
	return json.Marshal([]JSONPatchOp(p))
}

// RawPatch returns a patch of type pt whose data is data as given, for a
// patch built elsewhere. Use Client.Apply, not RawPatch, for server-side
// apply.
func RawPatch(pt types.PatchType, data []byte) Patch { return rawPatch{pt: pt, data: data} }

type rawPatch struct {
	pt   types.PatchType
	data []byte
}

func (p rawPatch) Type() types.PatchType { return p.pt }

func (p rawPatch) Data(Object) ([]byte, error) {
	if p.pt == types.ApplyPatchType || p.pt == types.ApplyCBORPatchType {
		return nil, fmt.Errorf("client: RawPatch of type %s: use Client.Apply for server-side apply", p.pt)
	}
	return p.data, nil
}
