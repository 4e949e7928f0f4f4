package informer

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// StripManagedFields is a cache.TransformFunc that drops
// metadata.managedFields from an object before it enters the cache. It
// leaves objects without metadata, and tombstones, untouched.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// composeTransforms returns convert followed, unless keepManagedFields, by
// StripManagedFields; nil when there is nothing to do.
func composeTransforms(convert cache.TransformFunc, keepManagedFields bool) cache.TransformFunc {
	switch {
	case keepManagedFields:
		return convert
	case convert == nil:
		return StripManagedFields
	}
	return func(obj any) (any, error) {
		out, err := convert(obj)
		if err != nil {
			return nil, err
		}
		return StripManagedFields(out)
	}
}
