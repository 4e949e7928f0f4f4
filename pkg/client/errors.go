package client

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// IgnoreNotFound returns nil if err says the object was not found
// (apierrors.IsNotFound), and err otherwise: for a Delete or Get whose
// object may already be gone.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// IgnoreAlreadyExists returns nil if err says the object already exists
// (apierrors.IsAlreadyExists), and err otherwise: for a Create that may
// race another.
func IgnoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// CacheLagError is returned by a write whose wait for the cache ended
// before the cache reflected it (see the package doc): the write itself
// succeeded, and the object passed to it holds the server's answer. Return
// it from Reconcile to retry later, when the cache has caught up.
type CacheLagError struct {
	// Resource, Namespace and Name identify the object written.
	Resource        schema.GroupVersionResource
	Namespace, Name string
	// ResourceVersion is that of the write; empty for a deletion.
	ResourceVersion string
	// Waited is how long the write waited.
	Waited time.Duration
	// Err is why the wait ended: the timeout (wrapping
	// context.DeadlineExceeded) or the caller's context.
	Err error
}

func (e *CacheLagError) Error() string {
	what := "deletion"
	if e.ResourceVersion != "" {
		what = "resourceVersion " + e.ResourceVersion
	}
	key := e.Name
	if e.Namespace != "" {
		key = e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("client: the write of %s %s succeeded (%s), but the cache did not reflect it after %v (raise client.Options.ReadYourWrites.Timeout if the cache is this slow): %v",
		e.Resource.Resource, key, what, e.Waited.Round(time.Millisecond), e.Err)
}

// Unwrap returns Err.
func (e *CacheLagError) Unwrap() error { return e.Err }
