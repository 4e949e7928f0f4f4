package objects

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// Object is a pointer to an API type, built-in such as *appsv1.Deployment
// or custom such as *v1alpha1.Website: what listers hold and writers take.
type Object interface {
	metav1.Object
	runtime.Object
}

// Writer creates and updates objects of type T in one namespace (or, for
// cluster-scoped types, in none). client-go's typed clients satisfy it as
// they are: kube.AppsV1().Deployments(ns) is a Writer[*appsv1.Deployment].
// DynamicWriter serves custom types.
type Writer[T Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// StatusWriter writes the status subresource of objects of type T. Typed
// clients and DynamicWriter satisfy it.
type StatusWriter[T Object] interface {
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// OperationResult says what CreateOrUpdate did.
type OperationResult string

// The results of CreateOrUpdate.
const (
	// Unchanged: the object already looked as mutate wants; nothing was
	// written.
	Unchanged OperationResult = "unchanged"
	// Created: the object did not exist and was created.
	Created OperationResult = "created"
	// Updated: the object existed and was updated.
	Updated OperationResult = "updated"
)

// CreateOrUpdate makes the object namespace/name (namespace empty for
// cluster-scoped types) look the way mutate says, and returns the object as
// the API server stored it (as mutate left it when Unchanged) and what it
// did. It blocks for at most one write.
//
// The current object is read from lister, the cache, never from the API
// server. If it exists, mutate receives a DeepCopy of it and CreateOrUpdate
// Updates it through w, unless mutate left it semantically equal to the
// cached object, in which case nothing is written. If it does not exist,
// mutate receives a new, empty T with only namespace and name set, and it
// is Created. mutate should set the fields the operator owns one by one,
// leaving the rest (server defaults, fields other controllers set) as they
// are: replacing a whole spec with one that lacks the defaults makes every
// call an Update. For *unstructured.Unstructured, mutate must set
// apiVersion and kind on a new object. mutate must not change namespace or
// name.
//
// w must write in namespace. Errors from mutate and from w are returned as
// they are. A conflict (apierrors.IsConflict: the cache was stale) or
// AlreadyExists (the cache had not yet seen the object) is expected now
// and then: return it from Reconcile, and the retry, after backoff, reads
// a fresher cache. Just before writing it calls leader.CheckLeading(ctx):
// under the ctx of a leader-only Reconcile whose replica can no longer
// prove it holds the lease, nothing is sent and the error wraps
// leader.ErrNotLeader.
func CreateOrUpdate[T Object](ctx context.Context, lister informer.Lister[T], w Writer[T], namespace, name string, mutate func(obj T) error) (T, OperationResult, error) {
	var zero T
	cached, err := lister.Get(namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return zero, Unchanged, err
	}
	if err != nil { // not found: create
		obj, err := newObject[T]()
		if err != nil {
			return zero, Unchanged, err
		}
		obj.SetNamespace(namespace)
		obj.SetName(name)
		if err := callMutate(obj, namespace, name, mutate); err != nil {
			return zero, Unchanged, err
		}
		if err := leader.CheckLeading(ctx); err != nil {
			return zero, Unchanged, err
		}
		out, err := w.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return zero, Unchanged, err
		}
		return out, Created, nil
	}
	obj, ok := cached.DeepCopyObject().(T)
	if !ok {
		return zero, Unchanged, fmt.Errorf("objects: DeepCopyObject of %T returned another type", cached)
	}
	if err := callMutate(obj, namespace, name, mutate); err != nil {
		return zero, Unchanged, err
	}
	if equality.Semantic.DeepEqual(cached, obj) {
		return obj, Unchanged, nil
	}
	if err := leader.CheckLeading(ctx); err != nil {
		return zero, Unchanged, err
	}
	out, err := w.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return zero, Unchanged, err
	}
	return out, Updated, nil
}

func callMutate[T Object](obj T, namespace, name string, mutate func(T) error) error {
	if err := mutate(obj); err != nil {
		return err
	}
	if obj.GetNamespace() != namespace || obj.GetName() != name {
		return fmt.Errorf("objects: mutate changed the object's namespace/name from %q/%q to %q/%q: it must not",
			namespace, name, obj.GetNamespace(), obj.GetName())
	}
	return nil
}

// newObject returns a new, empty T, which must be a pointer to a struct.
func newObject[T Object]() (T, error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		var zero T
		return zero, fmt.Errorf("objects: %v is not a pointer to an API struct such as *appsv1.Deployment", rt)
	}
	return reflect.New(rt.Elem()).Interface().(T), nil
}
