package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Field ownership is kube-apiserver's own machinery: apimachinery's
// managedfields.FieldManager (structured-merge-diff underneath) merges
// applied configurations, finds conflicts and keeps metadata.managedFields
// for applies, creates, updates and patches alike. What the fake supplies
// is the schema of each kind and the fields each endpoint resets.

// builtinTypes is the schema of client-go's built-in kinds: the OpenAPI
// models client-go ships for its apply configurations. Parsing them takes
// a while, so it happens once per process, at the first write that needs
// it.
var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(kubescheme.Scheme)
})

// fieldManagers are the field managers of one resource: of the resource
// itself and of its status subresource.
type fieldManagers struct {
	main, status *managedfields.FieldManager
}

// fieldManager returns the field manager of r, or of its status
// subresource when sub is "status"; called with c.mu held.
func (c *Cluster) fieldManager(r *resource, sub string) (*managedfields.FieldManager, error) {
	fms, ok := c.fieldManagers[r.gvr]
	if !ok {
		var err error
		if fms, err = c.newFieldManagers(r); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		c.fieldManagers[r.gvr] = fms
	}
	if sub == "status" {
		return fms.status, nil
	}
	return fms.main, nil
}

// newFieldManagers builds r's field managers. Built-in kinds get the
// OpenAPI schema (list merge keys, atomic and granular maps); any other
// kind, as a CRD without a schema, a schema deduced from the object
// itself, in which every list is atomic. The fields an endpoint does not
// store are reset, and so never owned: status on the resource, spec on
// its status subresource, as kube-apiserver's custom resource strategies.
func (c *Cluster) newFieldManagers(r *resource) (fieldManagers, error) {
	build := managedfields.NewDefaultCRDFieldManager
	var tc managedfields.TypeConverter
	if r.protobuf {
		tc, build = builtinTypes(), managedfields.NewDefaultFieldManager
	} else if c.typeConverter != nil {
		tc = c.typeConverter
	} else {
		tc = managedfields.NewDeducedTypeConverter()
	}
	gv := r.gvk.GroupVersion()
	version := fieldpath.APIVersion(gv.String())
	reset := func(field string) map[fieldpath.APIVersion]fieldpath.Filter {
		if !r.hasStatus {
			return nil
		}
		return map[fieldpath.APIVersion]fieldpath.Filter{
			version: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie(field))),
		}
	}
	var fms fieldManagers
	var err error
	if fms.main, err = build(tc, c.scheme, noDefaults{}, c.scheme, r.gvk, gv, "", reset("status")); err != nil {
		return fms, err
	}
	if fms.status, err = build(tc, c.scheme, noDefaults{}, c.scheme, r.gvk, gv, "status", reset("spec")); err != nil {
		return fms, err
	}
	return fms, nil
}

// noDefaults is the fake's defaulter: it has none.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// trackUpdate records in obj's managedFields the fields that a create,
// update or patch by manager changes from live (nil for a create), as
// kube-apiserver does for every write that is not an apply. It never
// fails the write: should the fields not be computed, the object's
// managedFields are reset, as kube-apiserver resets them. obj is the
// caller's, and may be changed.
func (c *Cluster) trackUpdate(r *resource, sub string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	fm, err := c.fieldManager(r, sub)
	if err != nil {
		return nil, err
	}
	live = liveCopy(r, live)
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	out := fm.UpdateNoErrors(live, obj, manager)
	out.GetObjectKind().SetGroupVersionKind(r.gvk)
	return c.typed(r, out)
}

// trackApply merges the applied configuration (JSON) onto live (nil if
// the object does not exist) for manager, and returns the new object
// with its managedFields. A conflict with another manager's fields is
// kube-apiserver's 409, whose causes name each field and its manager;
// with force the applier takes the fields over.
func (c *Cluster) trackApply(r *resource, sub string, live runtime.Object, applied []byte, manager string, force bool) (runtime.Object, error) {
	fm, err := c.fieldManager(r, sub)
	if err != nil {
		return nil, err
	}
	patch := &unstructured.Unstructured{}
	if err := json.Unmarshal(applied, &patch.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", err))
	}
	live = liveCopy(r, live)
	out, err := fm.Apply(live, patch, manager, force)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err
		}
		return nil, apierrors.NewInternalError(err)
	}
	return c.typed(r, out)
}

// liveCopy is what the field manager merges onto: a copy of live with its
// kind set, or an empty object of r's type when live is nil (a create).
func liveCopy(r *resource, live runtime.Object) runtime.Object {
	if live == nil {
		live = r.new()
	} else {
		live = live.DeepCopyObject()
	}
	live.GetObjectKind().SetGroupVersionKind(r.gvk)
	return live
}

// typed returns obj as a value of r's Go type, with no TypeMeta: the
// field manager may answer an unstructured object.
func (c *Cluster) typed(r *resource, obj runtime.Object) (runtime.Object, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		out := r.new()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		obj = out
	}
	if _, err := meta.Accessor(obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}

// managerOf is the field manager of a write that is not an apply: the
// fieldManager parameter, or else the user agent up to its first /, as
// kube-apiserver names it (printable characters only, at most 128 bytes).
func managerOf(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b bytes.Buffer
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > 128 {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
