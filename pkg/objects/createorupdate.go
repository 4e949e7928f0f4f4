package objects

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// Object is a pointer to an API type, built-in such as *appsv1.Deployment
// or custom such as *v1alpha1.Website: what listers hold and the client
// writes.
type Object = client.Object

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
// did. It blocks for at most one write through c.
//
// The current object is read from lister, the cache, never from the API
// server. If it exists, mutate receives a DeepCopy of it and CreateOrUpdate
// Updates it, unless mutate left it semantically equal to the cached
// object, in which case nothing is written. If it does not exist, mutate
// receives a new, empty T with only namespace and name set, and it is
// Created. mutate should set the fields the operator owns one by one,
// leaving the rest (server defaults, fields other controllers set) as they
// are: replacing a whole spec with one that lacks the defaults makes every
// call an Update. mutate must not change namespace or name.
//
// With read-your-own-writes (a manager's client), lister reflects every
// earlier write of c, so a conflict or AlreadyExists means another process
// wrote the object since the cache last heard of it: return the error from
// Reconcile, and the retry, after backoff, reads a fresher cache. Like
// every write of c, it is fenced by leadership.
//
// When several controllers, or the operator and a user, share an object,
// prefer Client.Apply: it writes only the fields the operator owns, with
// no read and no conflict on the others.
func CreateOrUpdate[T Object](ctx context.Context, c *client.Client, lister informer.Lister[T], namespace, name string, mutate func(obj T) error) (T, OperationResult, error) {
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
		if err := c.Create(ctx, obj); err != nil {
			return zero, Unchanged, err
		}
		return obj, Created, nil
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
	if err := c.Update(ctx, obj); err != nil {
		return zero, Unchanged, err
	}
	return obj, Updated, nil
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
