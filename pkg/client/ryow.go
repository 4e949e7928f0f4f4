package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// errRYOWTimeout is the cause of a wait that reached
// ReadYourWrites.Timeout.
var errRYOWTimeout = errors.New("read-your-own-writes timeout")

// await blocks until the cache reflects w, when read-your-own-writes is
// on.
func (c *Client) await(ctx context.Context, gvr schema.GroupVersionResource, w informer.Write) error {
	if c.cache == nil || c.ryow.Disabled {
		return nil
	}
	w.Resource = gvr
	start := time.Now()
	wctx, cancel := context.WithTimeoutCause(ctx, c.ryow.Timeout, errRYOWTimeout)
	defer cancel()
	err := c.cache.AwaitWrite(wctx, w)
	if err == nil {
		return nil
	}
	if cause := context.Cause(wctx); errors.Is(cause, errRYOWTimeout) && ctx.Err() == nil {
		err = fmt.Errorf("%w after %v: %w", errRYOWTimeout, c.ryow.Timeout, context.DeadlineExceeded)
	}
	return &CacheLagError{Resource: gvr, Namespace: w.Namespace, Name: w.Name, ResourceVersion: w.ResourceVersion, Waited: time.Since(start), Err: err}
}

// writeOf describes the write whose answer is obj. An answer marked for
// deletion with no finalizers left and no grace period (a pod's lets it
// run on) describes an object the write deleted: removing the last
// finalizer deletes the object, and the answer then carries the last
// resourceVersion the cache already holds, finalizers and all.
func writeOf(obj Object) informer.Write {
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && ptr.Deref(obj.GetDeletionGracePeriodSeconds(), 0) == 0 {
		return informer.Write{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), Deleted: true}
	}
	return informer.Write{
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
		Labels:          obj.GetLabels(),
	}
}

// writeOfDeletion describes the deletion of obj, answered with res: the
// object marked for deletion while finalizers keep it, or, once it is
// gone, the deleted object or a Status.
func writeOfDeletion(obj Object, res runtime.Object) informer.Write {
	if o, ok := res.(Object); ok && o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) > 0 {
		return writeOf(o)
	}
	w := informer.Write{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), Deleted: true}
	if w.UID == "" {
		switch r := res.(type) {
		case Object:
			w.UID = r.GetUID()
		case *metav1.Status:
			if r.Details != nil {
				w.UID = r.Details.UID
			}
		}
	}
	return w
}

// extractList returns the objects of a list answer.
func extractList(res runtime.Object) ([]Object, error) {
	items, err := meta.ExtractList(res)
	if err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
