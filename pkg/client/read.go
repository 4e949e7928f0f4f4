package client

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// GetFromServer reads the object key from the API server into obj. Reads
// belong to listers (informer.Lister), which cost no request and, with
// read-your-own-writes, already reflect this client's writes: use
// GetFromServer only for the rare read that must bypass the cache, such
// as an object of a type the operator does not watch.
func (c *Client) GetFromServer(ctx context.Context, key types.NamespacedName, obj Object) error {
	t, err := c.targetFor(obj)
	if err != nil {
		return err
	}
	if key.Name == "" {
		return fmt.Errorf("client: GetFromServer of %s: the key has no name", t.gvk.Kind)
	}
	return into(t.rest.Get().NamespaceIfScoped(key.Namespace, t.namespaced).Resource(t.gvr.Resource).Name(key.Name).Do(ctx), obj)
}

// ListFromServer lists the objects opts select from the API server into
// list, a list type such as *corev1.ConfigMapList. As for GetFromServer,
// reads belong to listers; this one costs a request that grows with the
// number of objects.
func (c *Client) ListFromServer(ctx context.Context, list runtime.Object, opts ListOptions) error {
	gvk, proto, err := c.kindOfList(list)
	if err != nil {
		return err
	}
	t, err := c.targetForKind(gvk, proto)
	if err != nil {
		return err
	}
	lo := opts.toMeta()
	return into(t.rest.Get().NamespaceIfScoped(opts.Namespace, t.namespaced && opts.Namespace != "").
		Resource(t.gvr.Resource).VersionedParams(&lo, metav1.ParameterCodec).Do(ctx), list)
}
