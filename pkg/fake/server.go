package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// requestInfo is what the URL and method say a request is.
type requestInfo struct {
	verb        string // get, list, watch, create, update, patch, apply, delete, deletecollection
	gvr         schema.GroupVersionResource
	res         *resource // nil if the fake does not serve gvr
	namespace   string
	name        string
	subresource string
}

// isWrite reports whether the verb changes state, so the request is
// recorded in Writes.
func (ri *requestInfo) isWrite() bool {
	switch ri.verb {
	case "create", "update", "patch", "apply", "delete", "deletecollection":
		return true
	}
	return false
}

// serve answers one request, in the media type negotiated from its
// Accept header (content.go); errors are a metav1.Status with the status
// code kube-apiserver would use.
func (c *Cluster) serve(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	if resp, ok := c.discovery(req); ok {
		return resp, nil
	}
	ri, err := c.route(req)
	var out output
	if err == nil {
		// As kube-apiserver, before anything is done.
		out, err = c.negotiate(req, ri.res, ri.verb == "watch")
	}
	switch {
	case err != nil:
		if ri.isWrite() {
			c.mu.Lock()
			c.writes = append(c.writes, Request{Verb: ri.verb, Resource: ri.gvr, Subresource: ri.subresource,
				Namespace: ri.namespace, Name: ri.name, Body: body, Err: err})
			c.mu.Unlock()
		}
	case ri.verb == "watch":
		var resp *http.Response
		if resp, err = c.watch(req, ri.res, ri.namespace, out); err == nil {
			return resp, nil
		}
	default:
		var code int
		var result any
		if code, result, err = c.handle(req, ri, body); err == nil {
			var data []byte
			if data, err = c.marshal(out, ri.res, result); err == nil {
				return response(req, code, out.contentType(false), data), nil
			}
		}
	}
	return c.errorResponse(req, err), nil
}

// route parses the URL as kube-apiserver does:
// /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]] and the
// same under /apis/{group}/{version}.
func (c *Cluster) route(req *http.Request) (requestInfo, error) {
	var ri requestInfo
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		ri.gvr.Version, rest = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		ri.gvr.Group, ri.gvr.Version, rest = parts[1], parts[2], parts[3:]
	default:
		return ri, notFound(req, ri)
	}
	if rest[0] == "namespaces" && len(rest) > 2 && rest[2] != "status" && rest[2] != "finalize" {
		ri.namespace, rest = rest[1], rest[2:]
	}
	if len(rest) > 3 || slices.Contains(rest, "") {
		return ri, notFound(req, ri)
	}
	ri.gvr.Resource = rest[0]
	if len(rest) > 1 {
		ri.name = rest[1]
	}
	if len(rest) > 2 {
		ri.subresource = rest[2]
	}
	named := ri.name != ""
	switch req.Method {
	case http.MethodGet:
		ri.verb = "list"
		if named {
			ri.verb = "get"
		} else if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			ri.verb = "watch"
		}
	case http.MethodPost:
		ri.verb = "create"
	case http.MethodPut:
		ri.verb = "update"
	case http.MethodPatch:
		ri.verb = "patch"
		if ct, _, _ := strings.Cut(req.Header.Get("Content-Type"), ";"); types.PatchType(strings.TrimSpace(ct)) == types.ApplyPatchType {
			ri.verb = "apply"
		}
	case http.MethodDelete:
		ri.verb = "deletecollection"
		if named {
			ri.verb = "delete"
		}
	}
	switch {
	case ri.verb == "",
		ri.verb == "create" && named,
		(ri.verb == "update" || ri.verb == "patch" || ri.verb == "apply") && !named:
		return ri, apierrors.NewMethodNotSupported(ri.gvr.GroupResource(), strings.ToLower(req.Method))
	}
	r := c.res.byGVR[ri.gvr]
	switch {
	case r == nil,
		r.namespaced && ri.namespace == "" && ri.name != "",
		!r.namespaced && ri.namespace != "",
		ri.subresource != "" && (ri.subresource != "status" || !r.hasStatus):
		return ri, notFound(req, ri)
	case r.namespaced && ri.namespace == "" && ri.verb != "list" && ri.verb != "watch",
		// Across namespaces kube-apiserver serves only list and watch.
		ri.subresource == "status" && ri.verb != "get" && ri.verb != "update" && ri.verb != "patch" && ri.verb != "apply":
		return ri, apierrors.NewMethodNotSupported(ri.gvr.GroupResource(), strings.ToLower(req.Method))
	}
	ri.res = r
	return ri, nil
}

// handle answers every verb but watch, with an object of ri.res, a list
// of them or a *metav1.Status.
func (c *Cluster) handle(req *http.Request, ri requestInfo, body []byte) (int, any, error) {
	r := ri.res
	switch ri.verb {
	case "get":
		c.mu.Lock()
		obj, ok := c.objects[r.gvr][objectKey(ri.namespace, ri.name)]
		c.mu.Unlock()
		if !ok {
			return 0, nil, apierrors.NewNotFound(r.groupResource(), ri.name)
		}
		return http.StatusOK, obj, nil
	case "list":
		var opts metainternalversion.ListOptions
		if err := decodeQuery(req, &opts); err != nil {
			return 0, nil, err
		}
		sel, err := c.selectorsOf(&opts)
		if err != nil {
			return 0, nil, err
		}
		c.mu.Lock()
		l := objectList{items: c.list(r, ri.namespace, sel), rv: c.rv, shard: sel.shard}
		c.mu.Unlock()
		return http.StatusOK, l, nil
	}

	return c.write(req, ri, body)
}

// decodeQuery decodes the query parameters into opts, a metav1 options
// type or metainternalversion.ListOptions.
func decodeQuery(req *http.Request, opts runtime.Object) error {
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// encodeList encodes l as r's List kind in JSON. Items of built-in
// kinds carry no apiVersion and kind, as kube-apiserver sends them; items
// of custom kinds do.
func (c *Cluster) encodeList(r *resource, l objectList) ([]byte, error) {
	list := struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ListMeta   `json:"metadata"`
		Items           []json.RawMessage `json:"items"`
	}{
		TypeMeta: metav1.TypeMeta{APIVersion: r.gvk.GroupVersion().String(), Kind: r.gvk.Kind + "List"},
		Items:    make([]json.RawMessage, 0, len(l.items)),
	}
	list.Metadata.ResourceVersion = listRV(l.rv)
	list.Metadata.ShardInfo = l.shardInfo()
	for _, obj := range l.items {
		var data []byte
		var err error
		if r.builtin {
			data, err = json.Marshal(obj)
		} else {
			data, err = c.encode(r, obj)
		}
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, data)
	}
	return json.Marshal(list)
}

// notFound is kube-apiserver's answer to a path it does not serve.
func notFound(req *http.Request, ri requestInfo) error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, strings.ToLower(req.Method), ri.gvr.GroupResource(), ri.name, "", 0, false)
}

// response is an answer of the media type contentType.
func response(req *http.Request, code int, contentType string, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {contentType}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// errorResponse answers err as a metav1.Status, in the media type the
// Accept header asks for, or JSON if it asks for none the fake has, as
// kube-apiserver does.
func (c *Cluster) errorResponse(req *http.Request, err error) *http.Response {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	s := status.Status()
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if s.Code == 0 {
		s.Code = http.StatusInternalServerError
	}
	out, err := c.negotiate(req, nil, false)
	if err != nil {
		out = output{info: c.media[0]} // the error itself, not a 406
	}
	body, _ := c.marshal(out, nil, &s) // a Status always encodes
	return response(req, int(s.Code), out.contentType(false), body)
}
