package fake

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// Answers are encoded in the media type negotiated from the request's
// Accept header as kube-apiserver negotiates it
// (k8s.io/apiserver/pkg/endpoints/handlers/negotiation, which the library
// does not depend on): the clauses in order of preference, the first the
// fake can answer wins, no header means JSON. The fake answers in JSON,
// and in protobuf for client-go's built-in kinds (custom resources have
// no protobuf encoding); the serializers are apimachinery's. A clause
// asking for metadata only (as=PartialObjectMetadata or
// PartialObjectMetadataList, g=meta.k8s.io, v=v1) is answered in either
// media type for any kind, as kube-apiserver does for custom resources
// too; one for another transformation (as=Table, or a version of
// meta.k8s.io other than v1) is passed over.

// Metadata-only answers, the values of output.as.
const (
	asPartial     = "PartialObjectMetadata"
	asPartialList = "PartialObjectMetadataList"
)

// output is how an answer is encoded.
type output struct {
	info runtime.SerializerInfo // JSON or protobuf
	as   string                 // "", asPartial or asPartialList
}

// contentType is the Content-Type of an answer; a watch's is the
// stream's, as kube-apiserver sends it.
func (o output) contentType(watch bool) string {
	if watch && o.info.MediaType != runtime.ContentTypeJSON {
		return o.info.MediaType + ";stream=watch"
	}
	return o.info.MediaType
}

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	typ, subtype string
	q            float64
	params       map[string]string
}

// parseAccept parses an Accept header and orders its clauses as
// github.com/munnerz/goautoneg does for kube-apiserver: by q, then the
// specific before wildcards, otherwise as written. Malformed clauses are
// skipped.
func parseAccept(header string) []acceptClause {
	var clauses []acceptClause
	for part := range strings.SplitSeq(header, ",") {
		mediaRange, params, _ := strings.Cut(part, ";")
		typ, subtype, _ := strings.Cut(strings.TrimSpace(mediaRange), "/")
		if typ == "*" && subtype == "" {
			subtype = "*"
		}
		if typ == "" || subtype == "" || strings.Contains(subtype, "/") {
			continue
		}
		c := acceptClause{typ: typ, subtype: subtype, q: 1, params: map[string]string{}}
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(p, "=")
			if !ok || strings.Contains(v, "=") {
				continue
			}
			if k = strings.TrimSpace(k); k == "q" {
				c.q, _ = strconv.ParseFloat(v, 32)
			} else {
				c.params[k] = strings.TrimSpace(v)
			}
		}
		clauses = append(clauses, c)
	}
	sort.SliceStable(clauses, func(i, j int) bool {
		a, b := clauses[i], clauses[j]
		switch {
		case a.q != b.q:
			return a.q > b.q
		case (a.typ == "*") != (b.typ == "*"):
			return b.typ == "*"
		}
		return a.subtype != "*" && b.subtype == "*"
	})
	return clauses
}

// negotiate chooses the encoding of the answer to req: for an object or
// list of r (transforming to metadata when asked), for a watch of r if
// watch, or, with r nil, for an error (any media type, never
// transformed). It fails with 406 Not Acceptable when no clause of the
// Accept header can be answered.
func (c *Cluster) negotiate(req *http.Request, r *resource, watch bool) (output, error) {
	header := req.Header.Get("Accept")
	if header == "" {
		return output{info: c.media[0]}, nil
	}
	for _, clause := range parseAccept(header) {
		for _, info := range c.media {
			if (clause.typ != "*" || clause.subtype != "*") &&
				(clause.typ != info.MediaTypeType || (clause.subtype != "*" && clause.subtype != info.MediaTypeSubType)) {
				continue
			}
			if out, ok := accepts(clause.params, info, r); ok {
				return out, nil
			}
		}
	}
	types := make([]string, len(c.media))
	for i, info := range c.media {
		types[i] = output{info: info}.contentType(watch)
	}
	return output{}, notAcceptable("only the following media types are accepted: " + strings.Join(types, ", "))
}

// accepts reports whether the fake can answer a clause with params in
// info's media type, and how, as kube-apiserver's
// acceptMediaTypeOptions and RequestScope.AllowsMediaTypeTransform decide.
func accepts(params map[string]string, info runtime.SerializerInfo, r *resource) (output, bool) {
	if s := params["stream"]; s != "" && (s != "watch" || info.StreamSerializer == nil) {
		return output{}, false
	}
	_, as := params["as"]
	_, g := params["g"]
	_, v := params["v"]
	switch {
	case !as && !g && !v: // the object as it is
		return output{info: info}, r == nil || info.MediaType == runtime.ContentTypeJSON || r.protobuf
	case r == nil, params["g"] != metav1.GroupName, params["v"] != "v1":
		return output{}, false
	case params["as"] == asPartial, params["as"] == asPartialList:
		return output{info: info, as: params["as"]}, true
	}
	return output{}, false
}

// notAcceptable is kube-apiserver's 406.
func notAcceptable(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: msg,
	}}
}

// objectList is a list answer: copies of the items, the resourceVersion
// of the list (0: none), and the shardSelector applied (nil: none), which
// the list echoes in metadata.shardInfo.
type objectList struct {
	items []runtime.Object
	rv    uint64
	shard sharding.Selector
}

// shardInfo is what a list answer says of the shardSelector applied.
func (l objectList) shardInfo() *metav1.ShardInfo {
	if l.shard == nil {
		return nil
	}
	return &metav1.ShardInfo{Selector: l.shard.String()}
}

// marshal encodes an answer for out: result is an object of r, a list of
// them, or a *metav1.Status (never transformed, as on kube-apiserver).
// Objects get r's apiVersion and kind; objects are not changed.
func (c *Cluster) marshal(out output, r *resource, result any) ([]byte, error) {
	var obj runtime.Object
	switch res := result.(type) {
	case *metav1.Status:
		obj = res
	case objectList:
		switch out.as {
		case asPartial:
			return nil, notAcceptable(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%sList)", r.gvk.Kind))
		case asPartialList:
			l := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: asPartialList}}
			for _, item := range res.items {
				l.Items = append(l.Items, *partial(item))
			}
			l.ResourceVersion = listRV(res.rv)
			l.ShardInfo = res.shardInfo()
			obj = l
		default:
			if out.info.MediaType == runtime.ContentTypeJSON {
				return c.encodeList(r, res)
			}
			// A built-in kind: its List kind is in the scheme.
			gvk := r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List")
			l, err := c.scheme.New(gvk)
			if err == nil {
				err = meta.SetList(l, res.items)
			}
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			l.GetObjectKind().SetGroupVersionKind(gvk)
			lm, _ := meta.ListAccessor(l)
			lm.SetResourceVersion(listRV(res.rv))
			if sl, ok := l.(metav1.ShardedListInterface); ok {
				sl.SetShardInfo(res.shardInfo())
			}
			obj = l
		}
	case runtime.Object:
		switch out.as {
		case asPartialList:
			return nil, notAcceptable(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%s)", r.gvk.Kind))
		case asPartial:
			obj = partial(res)
		default:
			obj = res.DeepCopyObject()
			obj.GetObjectKind().SetGroupVersionKind(r.gvk)
		}
	}
	var buf bytes.Buffer
	if err := out.info.Serializer.Encode(obj, &buf); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return buf.Bytes(), nil
}

// partial is obj's metadata, as kube-apiserver answers a request for
// metadata only. It shares obj's maps and slices.
func partial(obj runtime.Object) *metav1.PartialObjectMetadata {
	m, _ := meta.Accessor(obj)
	p := meta.AsPartialObjectMetadata(m)
	p.TypeMeta = metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: asPartial}
	return p
}

// listRV is a list's resourceVersion: rv, or none if 0.
func listRV(rv uint64) string {
	if rv == 0 {
		return ""
	}
	return strconv.FormatUint(rv, 10)
}
