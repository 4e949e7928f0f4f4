package client

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// ApplyConfiguration is what Apply sends: an apply configuration that
// names its object. client-go's apply configurations
// (k8s.io/client-go/applyconfigurations/...) are ones, as are those
// controller-gen generates for custom types
// (`controller-gen applyconfiguration paths=./api/...`).
//
// Apply configurations have a pointer for every field and omit the unset
// ones, so an apply sends exactly the fields the operator set: that is
// what makes the server give it ownership of those fields only. A custom
// type's own Go struct cannot do that — its zero values (a replicas of 0,
// an empty string) would be sent and owned — which is why Apply does not
// take Objects.
type ApplyConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
	GetKind() *string
	GetAPIVersion() *string
}

func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
