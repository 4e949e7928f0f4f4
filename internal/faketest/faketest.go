// Package faketest puts reactors in front of a pkg/fake API server, for
// the unit tests of ctrlkit's own packages: a reactor sees each request
// first and may answer it (an error, a held list, a gated watch) in place
// of the fake. It is test support, not part of ctrlkit's API.
package faketest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// Reactor answers a request in place of the fake, or returns a nil
// response and error to let the fake answer it.
type Reactor func(*http.Request) (*http.Response, error)

// Reactors is a fake and the reactors in front of it.
type Reactors struct {
	fake *fake.Cluster

	mu       sync.Mutex
	reactors []Reactor
}

// New returns Reactors in front of c, none yet.
func New(c *fake.Cluster) *Reactors { return &Reactors{fake: c} }

// React adds r after the reactors added before it.
func (rs *Reactors) React(r Reactor) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.reactors = append(rs.reactors, r)
}

// Config returns a rest config of the fake whose requests the reactors
// see first, in the order they were added, those added later included.
func (rs *Reactors) Config() *rest.Config {
	cfg := rs.fake.Config()
	cfg.Transport = roundTripper(func(req *http.Request) (*http.Response, error) {
		rs.mu.Lock()
		all := slices.Clone(rs.reactors)
		rs.mu.Unlock()
		for _, r := range all {
			if resp, err := r(req); resp != nil || err != nil {
				return resp, err
			}
		}
		return rs.fake.RoundTrip(req)
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Is reports whether req is a GET of resource (its path's last segment,
// such as "configmaps", or "v1" for discovery), a watch if watch is true
// and a list or get otherwise.
func Is(req *http.Request, resource string, watch bool) bool {
	return req.Method == http.MethodGet && path.Base(req.URL.Path) == resource && (req.URL.Query().Get("watch") == "true") == watch
}

// Status is the API server's answer of err, a Status in JSON.
func Status(err *apierrors.StatusError) *http.Response {
	st := err.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	body, merr := json.Marshal(st)
	if merr != nil {
		panic(merr)
	}
	return &http.Response{StatusCode: int(st.Code), Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body))}
}

// Cluster is a fake, a clientset on it, and reactors in front of it.
// Writes through the clientset go straight to the fake; Config's
// requests meet the reactors first.
type Cluster struct {
	*fake.Cluster
	kubernetes.Interface
	*Reactors
}

// NewCluster returns a Cluster over a new fake.New(opts). It fails t if
// opts are refused.
func NewCluster(t testing.TB, opts fake.Options) *Cluster {
	t.Helper()
	fc, err := fake.New(opts)
	if err != nil {
		t.Fatalf("fake.New: %v", err)
	}
	kube, err := kubernetes.NewForConfig(fc.Config())
	if err != nil {
		t.Fatal(err)
	}
	return &Cluster{Cluster: fc, Interface: kube, Reactors: New(fc)}
}

// Config returns a rest config of the fake whose requests the reactors
// see first.
func (c *Cluster) Config() *rest.Config { return c.Reactors.Config() }
