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

// composeTransforms returns convert, then StripManagedFields unless
// keepManagedFields, then share's transform unless share is nil; nil when
// there is nothing to do.
func composeTransforms(convert cache.TransformFunc, keepManagedFields bool, share *sharer) cache.TransformFunc {
	var steps []cache.TransformFunc
	if convert != nil {
		steps = append(steps, convert)
	}
	if !keepManagedFields {
		steps = append(steps, StripManagedFields)
	}
	if share != nil {
		steps = append(steps, share.transform)
	}
	switch len(steps) {
	case 0:
		return nil
	case 1:
		return steps[0]
	}
	return func(obj any) (any, error) {
		for _, t := range steps {
			var err error
			if obj, err = t(obj); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
}
