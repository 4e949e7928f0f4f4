package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// Globule is a custom type that a program registers into client-go's
// global scheme, as sample-controller does. The registration lasts for the
// test binary: its group is used by no other test.
type Globule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *Globule) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// GlobuleList is a list of Globules.
type GlobuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Globule `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *GlobuleList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = append([]Globule(nil), l.Items...)
	return &out
}

var registerGlobule = sync.OnceFunc(func() {
	gv := schema.GroupVersion{Group: "globalscheme.client.test.ctrlkit.io", Version: "v1"}
	kubescheme.Scheme.AddKnownTypes(gv, &Globule{}, &GlobuleList{})
	metav1.AddToGroupVersion(kubescheme.Scheme, gv)
})

// TestCustomTypeInGlobalScheme checks that a custom type registered into
// client-go's global scheme still travels as JSON: only client-go's own
// types have protobuf encodings.
func TestCustomTypeInGlobalScheme(t *testing.T) {
	registerGlobule()
	cluster, err := fake.New(fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var types []string
	record := roundTripper(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		types = append(types, req.Header.Get("Content-Type"))
		mu.Unlock()
		return cluster.RoundTrip(req)
	})
	c, err := client.New(cluster.Config(), client.Options{Mapper: cluster.RESTMapper(), HTTPClient: &http.Client{Transport: record}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &Globule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}); err != nil {
		t.Fatalf("Create of a custom type in the global scheme: %v", err)
	}
	if len(types) != 1 || types[0] != "application/json" {
		t.Errorf("sent as %v, want application/json", types)
	}
}
