// Package kube holds what ctrlkit's packages need of client-go and have
// no public meaning: which types are client-go's own, a REST client for
// one group version, and a ListWatch whose requests are narrowed.
package kube

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// BuiltIn reports whether gvk with Go type rt (a pointer type) is one of
// client-go's own types, which have protobuf encodings. A custom type that a program registered into
// kubescheme.Scheme, as sample-controller does, is not.
func BuiltIn(gvk schema.GroupVersionKind, rt reflect.Type) bool {
	t, ok := clientGoTypes()[gvk]
	return ok && reflect.PointerTo(t) == rt
}

// clientGoTypes are client-go's types by kind, read from a scheme that
// only client-go's AddToScheme fills, never from kubescheme.Scheme, which
// programs extend.
var clientGoTypes = sync.OnceValue(func() map[schema.GroupVersionKind]reflect.Type {
	s := runtime.NewScheme()
	// client-go's init registered the same types into kubescheme.Scheme
	// the same way: if it could fail, the program would not have started.
	utilruntime.Must(kubescheme.AddToScheme(s))
	return s.AllKnownTypes()
})

// RESTClient returns a REST client of gv built from a copy of cfg on hc,
// encoding and decoding with ns (WithoutConversion: straight into the Go
// types of a scheme). With proto it sends protobuf and accepts protobuf
// or JSON; without, JSON only.
func RESTClient(cfg *rest.Config, hc *http.Client, ns runtime.NegotiatedSerializer, gv schema.GroupVersion, proto bool) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = ns
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	if proto {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the REST client of %s: %w", gv, err)
	}
	return rc, nil
}

// WithoutConversion is codecs' NegotiatedSerializer that decodes into
// the Go types of codecs' scheme as they are sent, with no conversion.
func WithoutConversion(codecs serializer.CodecFactory) runtime.NegotiatedSerializer {
	return serializer.WithoutConversionCodecFactory{CodecFactory: codecs}
}

// ShareRateLimiter gives cfg, unless it has a limiter or no limit, one
// token bucket of its QPS and Burst, so that every client built from cfg
// or its copies draws on one budget, as the clients of one clientset do.
func ShareRateLimiter(cfg *rest.Config) {
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, max(cfg.Burst, 1))
	}
}
