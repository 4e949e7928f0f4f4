package kube

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestBuiltinTypesHaveInformers backs BuiltIn's claim: every client-go type
// that can be listed (its kind has a List kind) has a generated informer
// in the SharedInformerFactory, so a type BuiltIn accepts is served by the
// factory.
func TestBuiltinTypesHaveInformers(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0) // never started
	all := clientGoTypes()
	checked := 0
	for gvk, typ := range all {
		list := gvk
		list.Kind += "List"
		if strings.HasSuffix(gvk.Kind, "List") || all[list] == nil {
			continue
		}
		if gvk.Kind == "APIGroup" {
			continue // a discovery document registered as unversioned, not a resource
		}
		if !BuiltIn(gvk, reflect.PointerTo(typ)) {
			t.Errorf("BuiltIn(%v, *%v) = false, want true", gvk, typ)
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		if _, err := factory.ForResource(gvr); err != nil {
			t.Errorf("%v (%v) can be listed, but the factory has no informer: %v", gvk, typ, err)
		}
		checked++
	}
	if checked < 50 {
		t.Errorf("checked %d listable client-go kinds, want dozens: is the scheme empty?", checked)
	}
}
