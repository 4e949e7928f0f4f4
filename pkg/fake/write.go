package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// write answers a write and records it in c.writes, in the order of the
// store's commits. The answer is an object, a list or a *metav1.Status.
func (c *Cluster) write(req *http.Request, ri requestInfo, body []byte) (int, any, error) {
	w := Request{Verb: ri.verb, Resource: ri.gvr, Subresource: ri.subresource, Namespace: ri.namespace, Name: ri.name, Body: body}
	in, err := c.prepare(req, ri, &w)
	var code int
	var result any
	c.mu.Lock() // held until the write is recorded, so Writes is in commit order
	if err == nil {
		code, result, err = c.perform(ri, &w, in)
	}
	if err != nil {
		w.Err = err
	} else if obj, ok := result.(runtime.Object); ok && ri.verb != "delete" {
		w.Object = obj.DeepCopyObject()
	}
	c.writes = append(c.writes, w)
	c.mu.Unlock()
	return code, result, err
}

// writeInput is a write request, decoded.
type writeInput struct {
	obj      runtime.Object       // create, update
	delete   metav1.DeleteOptions // delete, deletecollection
	selector selectors            // deletecollection
	// manager is the field manager of a create, update or patch: the
	// fieldManager parameter or the user agent (managerOf).
	manager string
}

// prepare decodes a write's query and body, and fills in w.
func (c *Cluster) prepare(req *http.Request, ri requestInfo, w *Request) (writeInput, error) {
	var in writeInput
	var dryRun []string
	switch ri.verb {
	case "create", "update":
		var opts metav1.CreateOptions // UpdateOptions has the same parameters
		if err := decodeQuery(req, &opts); err != nil {
			return in, err
		}
		dryRun, w.FieldManager = opts.DryRun, opts.FieldManager
		var err error
		if in.obj, err = c.decodeObject(ri.res, w); err != nil {
			return in, err
		}
		if ri.verb == "create" {
			m, _ := meta.Accessor(in.obj)
			w.Name = m.GetName()
		}
	case "patch", "apply":
		var opts metav1.PatchOptions
		if err := decodeQuery(req, &opts); err != nil {
			return in, err
		}
		dryRun, w.FieldManager, w.Force = opts.DryRun, opts.FieldManager, opts.Force != nil && *opts.Force
		w.PatchType = types.PatchType(req.Header.Get("Content-Type"))
		pt, err := patchTypeFor(ri.res, string(w.PatchType))
		if err != nil {
			return in, err
		}
		w.PatchType = pt
		if err := checkPatchOptions(w); err != nil {
			return in, err
		}
		if ri.verb == "apply" {
			js, err := yaml.ToJSON(w.Body)
			if err != nil {
				return in, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
			}
			w.Body = js
			var applied struct {
				metav1.TypeMeta `json:",inline"`
				Metadata        struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(js, &applied); err != nil {
				return in, apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", err))
			}
			if applied.APIVersion == "" || applied.Kind == "" || applied.Metadata.Name == "" {
				return in, apierrors.NewBadRequest("an apply configuration needs apiVersion, kind and metadata.name")
			}
		}
	case "delete", "deletecollection":
		if err := c.decodeDeleteOptions(req, w, &in.delete); err != nil {
			return in, err
		}
		dryRun = in.delete.DryRun
		if ri.verb == "deletecollection" {
			var opts metainternalversion.ListOptions
			if err := decodeQuery(req, &opts); err != nil {
				return in, err
			}
			sel, err := c.selectorsOf(&opts)
			if err != nil {
				return in, err
			}
			in.selector = sel
		}
	}
	in.manager = managerOf(w.FieldManager, req.UserAgent())
	var err error
	w.DryRun, err = checkDryRun(dryRun)
	return in, err
}

// perform carries out a prepared write; called with c.mu held. The result
// is a runtime.Object, a *metav1.Status or, for deletecollection, an
// objectList.
func (c *Cluster) perform(ri requestInfo, w *Request, in writeInput) (int, any, error) {
	r := ri.res
	switch ri.verb {
	case "create":
		obj, err := c.trackUpdate(r, "", nil, in.obj, in.manager)
		if err != nil {
			return 0, nil, err
		}
		obj, err = c.create(r, ri.namespace, obj, w.DryRun)
		return http.StatusCreated, obj, err
	case "update":
		obj := in.obj
		if old, ok := c.objects[r.gvr][objectKey(ri.namespace, ri.name)]; ok {
			var err error
			if obj, err = c.trackUpdate(r, ri.subresource, old, obj, in.manager); err != nil {
				return 0, nil, err
			}
		}
		obj, err := c.update(r, ri.namespace, ri.name, ri.subresource, obj, w.DryRun)
		return http.StatusOK, obj, err
	case "delete":
		obj, gone, err := c.delete(r, ri.namespace, ri.name, &in.delete, w.DryRun)
		if err != nil || !gone || r.returnsDeleted {
			return http.StatusOK, obj, err
		}
		// kube-apiserver's generic registry (Store.finalizeDelete).
		m, _ := meta.Accessor(obj)
		return http.StatusOK, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: m.GetName(), Group: r.gvr.Group, Kind: r.gvr.Resource, UID: m.GetUID()},
		}, nil
	case "deletecollection":
		out := objectList{shard: in.selector.shard}
		for _, obj := range c.list(r, ri.namespace, in.selector) {
			m, _ := meta.Accessor(obj)
			after, gone, err := c.delete(r, m.GetNamespace(), m.GetName(), &metav1.DeleteOptions{}, w.DryRun)
			if err != nil {
				return 0, nil, err
			}
			if !gone {
				obj = after // marked for deletion
			}
			out.items = append(out.items, obj)
		}
		return http.StatusOK, out, nil
	}

	// patch and apply
	old, ok := c.objects[r.gvr][objectKey(ri.namespace, ri.name)]
	if !ok {
		if ri.verb != "apply" || ri.subresource != "" {
			return 0, nil, apierrors.NewNotFound(r.groupResource(), ri.name)
		}
		// Apply creates the object from the applied configuration.
		obj, err := c.trackApply(r, "", nil, w.Body, w.FieldManager, w.Force)
		if err != nil {
			return 0, nil, err
		}
		if m, _ := meta.Accessor(obj); m.GetName() != ri.name {
			return 0, nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), ri.name))
		}
		obj, err = c.create(r, ri.namespace, obj, w.DryRun)
		return http.StatusCreated, obj, err
	}
	var obj runtime.Object
	if ri.verb == "apply" {
		var err error
		if obj, err = c.trackApply(r, ri.subresource, old, w.Body, w.FieldManager, w.Force); err != nil {
			return 0, nil, err
		}
	} else {
		original, err := c.encode(r, old)
		if err != nil {
			return 0, nil, apierrors.NewInternalError(err)
		}
		patched, err := applyPatch(r, w.PatchType, original, w.Body)
		if err != nil {
			return 0, nil, err
		}
		if obj, err = c.decodeAs(r, patched); err != nil {
			return 0, nil, err
		}
		if obj, err = c.trackUpdate(r, ri.subresource, old, obj, in.manager); err != nil {
			return 0, nil, err
		}
	}
	obj, err := c.update(r, ri.namespace, ri.name, ri.subresource, obj, w.DryRun)
	return http.StatusOK, obj, err
}

// decodeObject decodes w.Body as an object of r's kind (JSON, YAML or
// protobuf), and sets w.Body to JSON.
func (c *Cluster) decodeObject(r *resource, w *Request) (runtime.Object, error) {
	obj, err := c.decodeAs(r, w.Body)
	if err != nil {
		return nil, err
	}
	if !json.Valid(w.Body) {
		if w.Body, err = c.encode(r, obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return obj, nil
}

// decodeAs decodes data as an object of r's kind, refusing another kind.
func (c *Cluster) decodeAs(r *resource, data []byte) (runtime.Object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	obj, gvk, err := c.decoder.Decode(data, &r.gvk, r.new())
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if *gvk != r.gvk || reflect.TypeOf(obj) != reflect.PointerTo(r.goType) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object in the data (%s) is not the kind the URL serves (%s)", gvk, r.gvk))
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}

// decodeDeleteOptions reads DeleteOptions from the body (JSON or
// protobuf) or else the query, as kube-apiserver does.
func (c *Cluster) decodeDeleteOptions(req *http.Request, w *Request, opts *metav1.DeleteOptions) error {
	if len(bytes.TrimSpace(w.Body)) == 0 {
		w.Body = nil
		return decodeQuery(req, opts)
	}
	gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
	obj, _, err := metainternalversionscheme.Codecs.UniversalDeserializer().Decode(w.Body, &gvk, opts)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	decoded, ok := obj.(*metav1.DeleteOptions)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("the body is a %T, not DeleteOptions", obj))
	}
	*opts = *decoded
	if !json.Valid(w.Body) {
		opts.TypeMeta = metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}
		w.Body, _ = json.Marshal(opts)
	}
	return nil
}

// checkDryRun accepts no dryRun or dryRun=All, as kube-apiserver does.
func checkDryRun(dryRun []string) (bool, error) {
	switch {
	case len(dryRun) == 0:
		return false, nil
	case len(dryRun) == 1 && dryRun[0] == metav1.DryRunAll:
		return true, nil
	}
	return false, apierrors.NewBadRequest(fmt.Sprintf("dryRun: unsupported value %q: supported values: %q", dryRun, metav1.DryRunAll))
}

// checkPatchOptions applies kube-apiserver's rules: apply needs a field
// manager, force is for apply only.
func checkPatchOptions(w *Request) error {
	var errs field.ErrorList
	if w.Verb == "apply" && w.FieldManager == "" {
		errs = append(errs, field.Required(field.NewPath("fieldManager"), "is required for apply patch"))
	}
	if w.Verb != "apply" && w.Force {
		errs = append(errs, field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return nil
}
