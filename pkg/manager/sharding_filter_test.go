package manager

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var cmsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// fakeServer answers every request with 200; a watch's body stays open
// until it is closed.
type fakeServer struct {
	mu   sync.Mutex
	sent []*http.Request
}

func (s *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.sent = append(s.sent, req)
	s.mu.Unlock()
	body := io.NopCloser(http.NoBody)
	if req.URL.Query().Get("watch") == "true" {
		r, w := io.Pipe()
		_ = w // never written: the watch waits for events
		body = r
	}
	return &http.Response{StatusCode: http.StatusOK, Body: body, Request: req}, nil
}

func (s *fakeServer) last() url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[len(s.sent)-1].URL.Query()
}

func (s *fakeServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// informerRequest is a request as an informer sends it: marked.
func informerRequest(t *testing.T, path string, query url.Values) *http.Request {
	t.Helper()
	o := metav1.ListOptions{}
	markInformers(func(o *metav1.ListOptions) { o.LabelSelector = query.Get("labelSelector") })(&o)
	query.Set("labelSelector", o.LabelSelector)
	query.Set("shardSelector", o.ShardSelector)
	req, err := http.NewRequest(http.MethodGet, "https://api.example"+path+"?"+query.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestShardFilterLabels: in the label mode, the sharded resources' lists
// and watches select the member's label, beside their own selector;
// other resources' requests and requests not from an informer only lose
// the mark, or pass untouched.
func TestShardFilterLabels(t *testing.T) {
	srv := &fakeServer{}
	f := &shardFilter{}
	f.useLabels([]schema.GroupVersionResource{cmsGVR}, "shard.ctrlkit.io/web=a-x")
	rt := f.wrap(srv)
	for _, tc := range []struct {
		path, labels, want string
	}{
		{"/api/v1/namespaces/ns/configmaps", "app=web", "app=web,shard.ctrlkit.io/web=a-x"},
		{"/api/v1/configmaps", "", "shard.ctrlkit.io/web=a-x"},
		{"/proxy/k8s/api/v1/namespaces/ns/configmaps", "", "shard.ctrlkit.io/web=a-x"},
		{"/api/v1/namespaces/ns/secrets", "app=web", "app=web"},
		{"/apis/apps/v1/namespaces/ns/configmaps", "", ""},
	} {
		if _, err := rt.RoundTrip(informerRequest(t, tc.path, url.Values{"labelSelector": {tc.labels}})); err != nil {
			t.Fatal(err)
		}
		q := srv.last()
		if q.Get("labelSelector") != tc.want || q.Has("shardSelector") {
			t.Errorf("%s: sent %v, want labelSelector %q and no shardSelector", tc.path, q, tc.want)
		}
	}
	// A request that is not an informer's (no mark) passes untouched.
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/api/v1/namespaces/ns/configmaps?labelSelector=x", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got := srv.last().Get("labelSelector"); got != "x" {
		t.Errorf("an unmarked list was changed: labelSelector %q", got)
	}
}

// TestShardFilterServer: in the server-side mode the sharded resources'
// lists and watches carry the member's shardSelector; reselect ends the
// open watches (once they are minWatch old), and a watch that has not
// listed since is answered 410 Gone (the reflector lists again), with the
// new selector.
func TestShardFilterServer(t *testing.T) {
	srv := &fakeServer{}
	f := &shardFilter{}
	f.useServer([]schema.GroupVersionResource{cmsGVR}, "sel-1")
	rt := f.wrap(srv)
	const path = "/api/v1/namespaces/ns/configmaps"
	list := func() {
		t.Helper()
		if _, err := rt.RoundTrip(informerRequest(t, path, url.Values{"resourceVersion": {"10"}})); err != nil {
			t.Fatal(err)
		}
	}
	watch := func() *http.Response {
		t.Helper()
		resp, err := rt.RoundTrip(informerRequest(t, path, url.Values{"watch": {"true"}, "resourceVersion": {"10"}}))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := watch(); resp.StatusCode != http.StatusGone || srv.count() != 0 {
		t.Fatalf("a watch before any list: %d, %d requests sent; want 410 and none", resp.StatusCode, srv.count())
	}
	list()
	if got := srv.last().Get("shardSelector"); got != "sel-1" {
		t.Fatalf("list sent shardSelector %q, want sel-1", got)
	}
	opened := time.Now()
	w := watch()
	if w.StatusCode != http.StatusOK || srv.last().Get("shardSelector") != "sel-1" {
		t.Fatalf("watch after the list: %d, shardSelector %q", w.StatusCode, srv.last().Get("shardSelector"))
	}
	read := make(chan error, 1)
	go func() {
		_, err := w.Body.Read(make([]byte, 1))
		read <- err
	}()
	f.reselect("sel-1") // the same selector: nothing happens
	f.reselect("sel-2")
	select {
	case err := <-read:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the cut watch's read returned %v, want io.EOF", err)
		}
		if age := time.Since(opened); age < minWatch {
			t.Errorf("the watch was cut %v after it opened, before minWatch (%v): client-go would warn of a very short watch", age, minWatch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reselect did not end the open watch")
	}
	if err := w.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if resp := watch(); resp.StatusCode != http.StatusGone {
		t.Fatalf("a watch after reselect, before a list: %d, want 410", resp.StatusCode)
	}
	list()
	if got := srv.last().Get("shardSelector"); got != "sel-2" {
		t.Fatalf("the list after reselect sent %q, want sel-2", got)
	}
	if resp := watch(); resp.StatusCode != http.StatusOK || srv.last().Get("shardSelector") != "sel-2" {
		t.Fatalf("the watch after the new list: %d", resp.StatusCode)
	}
	f.mu.Lock()
	open := len(f.watches)
	f.mu.Unlock()
	if open != 1 {
		t.Errorf("%d watches tracked, want 1 (the closed one forgotten)", open)
	}
}

func TestCollection(t *testing.T) {
	for _, tc := range []struct {
		path string
		want schema.GroupVersionResource
		ok   bool
	}{
		{"/api/v1/configmaps", cmsGVR, true},
		{"/api/v1/namespaces/ns/configmaps", cmsGVR, true},
		{"/apis/apps/v1/namespaces/ns/deployments", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"/apis/test.ctrlkit.io/v1/widgets", schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"}, true},
		{"/api/v1/namespaces", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, true},
		{"/api/v1/namespaces/ns", schema.GroupVersionResource{}, false},
		{"/api/v1/namespaces/ns/configmaps/one", schema.GroupVersionResource{}, false},
		{"/apis/apps/v1/namespaces/ns/deployments/d/status", schema.GroupVersionResource{}, false},
		{"/healthz", schema.GroupVersionResource{}, false},
	} {
		if got, ok := collection(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("collection(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
