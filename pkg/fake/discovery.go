package fake

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	resourceVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	statusVerbs   = metav1.Verbs{"get", "patch", "update"}
)

// discovery answers the discovery paths /api, /api/v1, /apis,
// /apis/{group} and /apis/{group}/{version} from the scheme, in the
// unaggregated format (client-go falls back to it whatever it asked for).
// It reports false for any other path.
func (c *Cluster) discovery(req *http.Request) (*http.Response, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var v any
	found := true
	switch {
	case len(parts) == 1 && parts[0] == "api":
		v = c.apiVersions()
	case len(parts) == 2 && parts[0] == "api":
		l := c.resourceList(schema.GroupVersion{Version: parts[1]})
		v, found = l, l != nil
	case len(parts) == 1 && parts[0] == "apis":
		v = c.groupList()
	case len(parts) == 2 && parts[0] == "apis":
		g := c.group(parts[1])
		v, found = g, g != nil
	case len(parts) == 3 && parts[0] == "apis":
		l := c.resourceList(schema.GroupVersion{Group: parts[1], Version: parts[2]})
		v, found = l, l != nil
	default:
		return nil, false
	}
	if req.Method != http.MethodGet {
		return c.errorResponse(req, apierrors.NewMethodNotSupported(schema.GroupResource{}, strings.ToLower(req.Method))), true
	}
	if !found {
		return c.errorResponse(req, apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false)), true
	}
	body, err := json.Marshal(v)
	if err != nil {
		return c.errorResponse(req, err), true
	}
	return response(req, http.StatusOK, runtime.ContentTypeJSON, body), true
}

// apiVersions is /api: the versions of the core group.
func (c *Cluster) apiVersions() *metav1.APIVersions {
	out := &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{}}
	if i := slices.IndexFunc(c.res.groups, func(g group) bool { return g.name == "" }); i >= 0 {
		out.Versions = c.res.groups[i].versions
	}
	return out
}

// groupList is /apis: every named group.
func (c *Cluster) groupList() *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range c.res.groups {
		if g.name != "" {
			out.Groups = append(out.Groups, *c.group(g.name))
		}
	}
	return out
}

// group is /apis/{name}, nil if there is no such group.
func (c *Cluster) group(name string) *metav1.APIGroup {
	i := slices.IndexFunc(c.res.groups, func(g group) bool { return g.name == name })
	if i < 0 || name == "" {
		return nil
	}
	out := &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: name}
	for _, v := range c.res.groups[i].versions {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	out.PreferredVersion = out.Versions[0]
	return out
}

// resourceList is /api/v1 or /apis/{group}/{version}, nil if the fake
// serves nothing there.
func (c *Cluster) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	var rs []*resource
	for gvr, r := range c.res.byGVR {
		if gvr.GroupVersion() == gv {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b *resource) int { return strings.Compare(a.gvr.Resource, b.gvr.Resource) })
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, r := range rs {
		out.APIResources = append(out.APIResources, metav1.APIResource{
			Name: r.gvr.Resource, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: resourceVerbs,
		})
		if r.hasStatus {
			out.APIResources = append(out.APIResources, metav1.APIResource{
				Name: r.gvr.Resource + "/status", Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: statusVerbs,
			})
		}
	}
	return out
}
