package informer_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestDiscoveryErrors checks that For and ForResource tell a resource the
// API server does not serve (a CRD to install) from a discovery that could
// not be read (a server to reach), and wrap the cause either way.
func TestDiscoveryErrors(t *testing.T) {
	// The address of a server that is gone: connections are refused.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	unreachable := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(
		discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})))
	notServed := newMapper() // serves no widgets

	for _, tt := range []struct {
		name    string
		mapper  meta.RESTMapper
		declare func(*informer.Cache) error
		want    []string
		noMatch bool // the error is a meta.IsNoMatchError
	}{
		{
			name:    "For, not served",
			mapper:  notServed,
			declare: func(c *informer.Cache) error { _, err := informer.For[*Widget](c); return err },
			want:    []string{"For[*informer_test.Widget]", "does not serve", "is its CRD installed?"},
			noMatch: true,
		},
		{
			name:    "For, discovery unreachable",
			mapper:  unreachable,
			declare: func(c *informer.Cache) error { _, err := informer.For[*corev1.ConfigMap](c); return err },
			want:    []string{"For[*v1.ConfigMap]", "discovery", "connection refused"},
		},
		{
			name:    "ForResource, not served",
			mapper:  notServed,
			declare: func(c *informer.Cache) error { _, err := informer.ForResource(c, widgetGVR); return err },
			want:    []string{"ForResource(widgets.v1.test.ctrlkit.io)", "does not serve", "is its CRD installed?"},
			noMatch: true,
		},
		{
			name:    "ForResource, discovery unreachable",
			mapper:  unreachable,
			declare: func(c *informer.Cache) error { _, err := informer.ForResource(c, widgetGVR); return err },
			want:    []string{"ForResource(widgets.v1.test.ctrlkit.io)", "discovery", "connection refused"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := informer.New(clientsWith(t, tt.mapper),
				informer.Options{Scheme: builtinAndWidgetScheme(t)})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.declare(c)
			if err == nil {
				t.Fatal("declaring succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := meta.IsNoMatchError(err); got != tt.noMatch {
				t.Errorf("meta.IsNoMatchError(%v) = %v, want %v", err, got, tt.noMatch)
			}
			if !tt.noMatch {
				if strings.Contains(err.Error(), "CRD") {
					t.Errorf("error %q suggests a missing CRD, but the server could not be reached", err)
				}
				var ue *url.Error
				if !errors.As(err, &ue) {
					t.Errorf("error %v does not wrap the *url.Error of the failed request", err)
				}
			}
		})
	}
}
