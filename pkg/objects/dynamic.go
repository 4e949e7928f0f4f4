package objects

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// DynamicWriter writes objects of a custom Go type T, such as
// *v1alpha1.Website, through the dynamic client: for custom resources that
// have no generated clientset. It is a Writer[T] and a StatusWriter[T].
// Objects are converted to unstructured and back with
// runtime.DefaultUnstructuredConverter, so T needs JSON tags and a
// DeepCopyObject, as controller-gen makes them. Like CreateOrUpdate, it
// sends nothing once leader.CheckLeading(ctx) fails. Safe for concurrent
// use.
type DynamicWriter[T Object] struct {
	client dynamic.ResourceInterface
	gvk    schema.GroupVersionKind
}

var (
	_ Writer[*unstructured.Unstructured]       = (*DynamicWriter[*unstructured.Unstructured])(nil)
	_ StatusWriter[*unstructured.Unstructured] = (*DynamicWriter[*unstructured.Unstructured])(nil)
)

// NewDynamicWriter returns a DynamicWriter that writes objects of kind gvk
// through client. Like a typed client, client is bound to one namespace
// (dyn.Resource(gvr).Namespace(ns)), or to none for cluster-scoped types.
// Every object written gets gvk as its apiVersion and kind.
func NewDynamicWriter[T Object](client dynamic.ResourceInterface, gvk schema.GroupVersionKind) *DynamicWriter[T] {
	return &DynamicWriter[T]{client: client, gvk: gvk}
}

// Create creates obj and returns the object as the API server stored it.
func (w *DynamicWriter[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return w.write(ctx, obj, func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return w.client.Create(ctx, u, opts)
	})
}

// Update replaces obj (not its status, when the resource has a status
// subresource) and returns the object as the API server stored it. It
// fails with a conflict if obj's resourceVersion is not the latest.
func (w *DynamicWriter[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return w.write(ctx, obj, func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return w.client.Update(ctx, u, opts)
	})
}

// UpdateStatus replaces obj's status subresource and returns the object as
// the API server stored it. It fails with a conflict if obj's
// resourceVersion is not the latest.
func (w *DynamicWriter[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return w.write(ctx, obj, func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return w.client.UpdateStatus(ctx, u, opts)
	})
}

// write converts obj, sends it with do, unless ctx's leadership term is
// over, and converts the answer back. Errors from do are returned as they
// are, for apierrors' predicates.
func (w *DynamicWriter[T]) write(ctx context.Context, obj T, do func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) (T, error) {
	var zero T
	if err := leader.CheckLeading(ctx); err != nil {
		return zero, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return zero, fmt.Errorf("objects: converting %T %s to unstructured: %w", obj, keyOf(obj), err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(w.gvk)
	out, err := do(u)
	if err != nil {
		return zero, err
	}
	res, err := newObject[T]()
	if err != nil {
		return zero, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.UnstructuredContent(), res); err != nil {
		return zero, fmt.Errorf("objects: converting %s %s back to %T: %w", out.GetKind(), keyOf(out), res, err)
	}
	return res, nil
}
