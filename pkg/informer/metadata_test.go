package informer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// metadataProtocol makes the fake API server, which always answers full
// objects as JSON, answer requests for metadata (Accept:
// application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1) as
// kube-apiserver does: PartialObjectMetadata objects, lists and watch
// events. Without it client-go's metadata client decodes lists (it falls
// back to reading the metadata out of full objects) but not watch events.
// It counts the metadata watches.
type metadataProtocol struct {
	next    http.RoundTripper
	watches atomic.Int32
}

func (mp *metadataProtocol) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
		return mp.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", "application/json")
	resp, err := mp.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if req.URL.Query().Get("watch") == "true" {
		mp.watches.Add(1)
		resp.Body = &metadataEvents{body: resp.Body, r: bufio.NewReader(resp.Body)}
		return resp, nil
	}
	defer resp.Body.Close()
	var full struct {
		Kind     string            `json:"kind"`
		Metadata json.RawMessage   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &full); err != nil {
		return nil, err
	}
	var out any = partial(raw)
	if strings.HasSuffix(full.Kind, "List") {
		items := make([]any, len(full.Items))
		for i, it := range full.Items {
			items[i] = partial(it)
		}
		out = map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": full.Metadata, "items": items}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Type", "application/json")
	return resp, nil
}

// partial returns the PartialObjectMetadata of the JSON object raw.
func partial(raw json.RawMessage) map[string]any {
	var obj struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &obj)
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj.Metadata}
}

// metadataEvents turns a watch stream of full objects, one JSON event a
// line, into one of PartialObjectMetadata; Status objects (ERROR events)
// pass through. It reads on its caller's goroutine.
type metadataEvents struct {
	body io.Closer
	r    *bufio.Reader
	buf  []byte
}

func (m *metadataEvents) Read(p []byte) (int, error) {
	for len(m.buf) == 0 {
		line, err := m.r.ReadBytes('\n')
		if len(line) > 0 {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if jerr := json.Unmarshal(line, &ev); jerr == nil && !bytes.Contains(ev.Object, []byte(`"kind":"Status"`)) {
				b, _ := json.Marshal(map[string]any{"type": ev.Type, "object": partial(ev.Object)})
				line = append(b, '\n')
			}
			m.buf = line
		}
		if err != nil && len(m.buf) == 0 {
			return 0, err
		}
	}
	n := copy(p, m.buf)
	m.buf = m.buf[n:]
	return n, nil
}

func (m *metadataEvents) Close() error { return m.body.Close() }

// metadataClients returns Clients over cluster whose Config speaks the
// metadata protocol.
func metadataClients(t *testing.T, cluster *fake.Cluster) (informer.Clients, *metadataProtocol) {
	t.Helper()
	mp := &metadataProtocol{next: cluster}
	clients := fakeClients(t, cluster)
	clients.Config = cluster.Config()
	clients.Config.Transport = mp
	return clients, mp
}

func secret(ns, name string, lbls map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Data: map[string][]byte{"password": []byte("hunter2")},
	}
}

// TestForMetadataListsAndWatchesMetadata: the informer lists and watches
// through the metadata protocol and caches PartialObjectMetadata that
// carry the Secret's kind, no data, and no managedFields.
func TestForMetadataListsAndWatchesMetadata(t *testing.T) {
	cluster := newFakeCluster(t, kubescheme.Scheme, secret("a", "one", nil))
	clients, mp := metadataClients(t, cluster)
	c, err := informer.New(clients, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := informer.ForMetadata[*corev1.Secret](c); err != nil || again != secrets {
		t.Fatalf("second ForMetadata = %v, %v; want the same informer", again, err)
	}
	if got, want := secrets.GroupVersionResource(), corev1.SchemeGroupVersion.WithResource("secrets"); got != want {
		t.Errorf("GroupVersionResource = %v, want %v", got, want)
	}
	if got, want := secrets.Name(), "secrets.v1 (metadata)"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	start(t, c)

	kube := kubernetes.NewForConfigOrDie(cluster.Config())
	if _, err := kube.CoreV1().Secrets("a").Create(t.Context(), secret("a", "two", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The create arrives on the metadata watch (counted below).
	waitUntil(t, "the created Secret in the cache", func() bool {
		_, err := secrets.Lister().Get("a", "two")
		return err == nil
	})
	all, err := secrets.Lister().List(labels.Everything())
	if err != nil || len(all) != 2 {
		t.Fatalf("List = %d objects, %v; want 2", len(all), err)
	}
	for _, s := range all {
		if got, want := s.GroupVersionKind(), corev1.SchemeGroupVersion.WithKind("Secret"); got != want {
			t.Errorf("%s: kind %v, want %v", s.Name, got, want)
		}
		if s.UID == "" || s.ResourceVersion == "" {
			t.Errorf("%s: uid %q, resourceVersion %q: metadata missing", s.Name, s.UID, s.ResourceVersion)
		}
		if s.ManagedFields != nil {
			t.Errorf("%s: managedFields kept: %v", s.Name, s.ManagedFields)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u["data"]; ok {
			t.Errorf("%s: cached object holds data: %v", s.Name, u)
		}
	}
	if mp.watches.Load() == 0 {
		t.Error("no metadata watch: the informer did not watch through the metadata protocol")
	}
}

// TestForMetadataScope: ByType keyed by the Go type, Options.Namespace and
// TweakListOptions narrow the metadata informer as they do For's.
func TestForMetadataScope(t *testing.T) {
	objs := []runtime.Object{
		secret("a", "in", map[string]string{"app": "x", "tier": "db"}),
		secret("a", "other-app", map[string]string{"app": "y", "tier": "db"}),
		secret("a", "other-tier", map[string]string{"app": "x"}),
		secret("b", "other-ns", map[string]string{"app": "x", "tier": "db"}),
	}
	cluster := newFakeCluster(t, kubescheme.Scheme, objs...)
	clients, _ := metadataClients(t, cluster)
	c, err := informer.New(clients, informer.Options{
		Namespaces:       []string{"b"},
		TweakListOptions: func(o *metav1.ListOptions) { o.LabelSelector = "app=x" },
		ByType:           map[runtime.Object]informer.TypeOptions{&corev1.Secret{}: {Namespaces: []string{"a"}, LabelSelector: "tier=db"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	all, err := secrets.Lister().List(nil)
	if err != nil || len(all) != 1 || all[0].Name != "in" {
		t.Fatalf("List = %v, %v; want a/in alone", all, err)
	}
	inA, err := secrets.Lister().ListInNamespace("a", nil)
	if err != nil || len(inA) != 1 {
		t.Fatalf("ListInNamespace(a) = %v, %v; want a/in (namespace index)", inA, err)
	}
}

// TestForMetadataConflicts: a resource declared full and metadata-only is
// an error, whichever comes second, naming the declaration that exists.
func TestForMetadataConflicts(t *testing.T) {
	secretsGVR := corev1.SchemeGroupVersion.WithResource("secrets")
	full := map[string]func(*informer.Cache) error{
		"For": func(c *informer.Cache) error { _, err := informer.For[*corev1.Secret](c); return err },
		"ForResource": func(c *informer.Cache) error {
			_, err := informer.ForResource(c, secretsGVR)
			return err
		},
	}
	forMetadata := func(c *informer.Cache) error { _, err := informer.ForMetadata[*corev1.Secret](c); return err }
	newC := func(t *testing.T) *informer.Cache {
		clients, _ := metadataClients(t, newFakeCluster(t, kubescheme.Scheme))
		c, err := informer.New(clients, informer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for name, declFull := range full {
		t.Run(name+" then ForMetadata", func(t *testing.T) {
			c := newC(t)
			if err := declFull(c); err != nil {
				t.Fatal(err)
			}
			err := forMetadata(c)
			if err == nil || !strings.Contains(err.Error(), "informer.ForMetadata[*v1.Secret]") ||
				!strings.Contains(err.Error(), "already declared as secrets.v1 (") || !strings.Contains(err.Error(), "pick one") {
				t.Fatalf("ForMetadata after %s: err = %v; want one naming both and asking to pick one", name, err)
			}
		})
		t.Run("ForMetadata then "+name, func(t *testing.T) {
			c := newC(t)
			if err := forMetadata(c); err != nil {
				t.Fatal(err)
			}
			err := declFull(c)
			if err == nil || !strings.Contains(err.Error(), "already declared as secrets.v1 (metadata)") || !strings.Contains(err.Error(), "pick one") {
				t.Fatalf("%s after ForMetadata: err = %v; want one naming the metadata declaration", name, err)
			}
		})
	}
	t.Run("other resources are free", func(t *testing.T) {
		c := newC(t)
		if err := forMetadata(c); err != nil {
			t.Fatal(err)
		}
		if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNewNeedsConfig: a Cache without Clients.Config is an error at New
// that says what to pass; and ForMetadata's T must name a kind.
func TestNewNeedsConfig(t *testing.T) {
	cluster := newFakeCluster(t, kubescheme.Scheme)
	clients := fakeClients(t, cluster)
	clients.Config = nil
	if _, err := informer.New(clients, informer.Options{}); err == nil || !strings.Contains(err.Error(), "Clients.Config is nil") || !strings.Contains(err.Error(), "pkg/fake") {
		t.Fatalf("New without Config: err = %v; want one naming Clients.Config and pkg/fake", err)
	}
	c, err := informer.New(fakeClients(t, cluster), informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informer.ForMetadata[*metav1.PartialObjectMetadata](c); err == nil {
		t.Fatal("ForMetadata[*metav1.PartialObjectMetadata]: no error; T must name a kind")
	}
}

// TestForMetadataReadYourWrites: a Secret written through pkg/client is in
// the metadata informer's cache when the write returns.
func TestForMetadataReadYourWrites(t *testing.T) {
	cluster := newFakeCluster(t, kubescheme.Scheme)
	clients, _ := metadataClients(t, cluster)
	c, err := informer.New(clients, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	cl, err := client.New(cluster.Config(), client.Options{Scheme: kubescheme.Scheme, Mapper: cluster.RESTMapper(), Cache: c,
		ReadYourWrites: client.ReadYourWrites{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s := secret("a", "s", nil)
	s.ManagedFields = nil
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, err := secrets.Lister().Get("a", "s"); err != nil || got.ResourceVersion != s.ResourceVersion {
		t.Fatalf("right after Create: Get = %v, %v; want resourceVersion %s", got, err, s.ResourceVersion)
	}
	s.Labels = map[string]string{"v": "2"}
	if err := cl.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, err := secrets.Lister().Get("a", "s"); err != nil || got.Labels["v"] != "2" {
		t.Fatalf("right after Update: Get = %v, %v; want label v=2", got, err)
	}
	if err := cl.Delete(ctx, s, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Lister().Get("a", "s"); err == nil {
		t.Fatal("right after Delete: Get found the Secret")
	}
}

// TestForMetadataIndexByControllerOwner: IndexByControllerOwner files
// metadata objects under their controller, as it does full ones.
func TestForMetadataIndexByControllerOwner(t *testing.T) {
	owned := secret("a", "owned", nil)
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: widgetGV.String(), Kind: "Widget", Name: "w", UID: "u", Controller: &yes}}
	cluster := newFakeCluster(t, kubescheme.Scheme, owned, secret("a", "free", nil))
	clients, _ := metadataClients(t, cluster)
	c, err := informer.New(clients, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	if err := informer.AddIndex(secrets, informer.ControllerIndex, informer.IndexByControllerOwner); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	key := informer.ControllerKey(schema.GroupKind{Group: widgetGV.Group, Kind: "Widget"}, "a", "w")
	got, err := secrets.Lister().ByIndex(informer.ControllerIndex, key)
	if err != nil || len(got) != 1 || got[0].Name != "owned" {
		t.Fatalf("ByIndex(%q) = %v, %v; want a/owned", key, got, err)
	}
	// OwnerKey maps a metadata object to its owner from its
	// ownerReferences: the object's own kind plays no part.
	keys := informer.OwnerKey(schema.GroupKind{Group: widgetGV.Group, Kind: "Widget"})(got[0])
	if len(keys) != 1 || keys[0].Namespace != "a" || keys[0].Name != "w" {
		t.Fatalf("OwnerKey = %v, want a/w", keys)
	}
}

// BenchmarkHeapPerPod_typedVsMetadata reports the heap bytes each cached
// Pod costs (bytes/pod, live heap after GC, cache synced) with For and
// with ForMetadata, over the fake API server holding 2000 Pods of about
// 4 KB of JSON each, most of it spec. Run it alone:
//
//	go test -run '^$' -bench HeapPerPod -benchtime 3x ./pkg/informer/
func BenchmarkHeapPerPod_typedVsMetadata(b *testing.B) {
	const pods = 2000
	objs := make([]runtime.Object, pods)
	for i := range objs {
		env := make([]corev1.EnvVar, 40)
		for j := range env {
			env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", j), Value: strings.Repeat("v", 60)}
		}
		yes := true
		objs[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%04d", i),
				Labels:          map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b4"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7c9b4", UID: "u", Controller: &yes}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.3",
				Command: []string{"/bin/web", "--listen=:8080"}, Env: env}}},
		}
	}
	cases := []struct {
		name    string
		declare func(*informer.Cache) (informer.Source, error)
	}{
		{"For", func(c *informer.Cache) (informer.Source, error) { return informer.For[*corev1.Pod](c) }},
		{"ForMetadata", func(c *informer.Cache) (informer.Source, error) { return informer.ForMetadata[*corev1.Pod](c) }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cluster, err := fake.New(fake.Options{Scheme: kubescheme.Scheme, Objects: objs})
			if err != nil {
				b.Fatal(err)
			}
			var perPod float64
			for b.Loop() {
				perPod = heapPerObject(b, cluster, tc.declare)
			}
			b.ReportMetric(perPod, "bytes/pod")
		})
	}
}

// heapPerObject declares one informer over cluster with declare, starts it,
// and returns the live heap it added per cached object once synced.
func heapPerObject(b *testing.B, cluster *fake.Cluster, declare func(*informer.Cache) (informer.Source, error)) float64 {
	b.Helper()
	mp := &metadataProtocol{next: cluster}
	cfg := cluster.Config()
	cfg.Transport = mp
	c, err := informer.New(informer.Clients{Mapper: cluster.RESTMapper(), Config: cfg}, informer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	src, err := declare(c)
	if err != nil {
		b.Fatal(err)
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(b.Context())
	defer func() {
		cancel()
		c.Wait()
	}()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		b.Fatal(err)
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	n := src.Len()
	if n == 0 {
		b.Fatal("nothing cached")
	}
	goruntime.KeepAlive(c)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestForMetadataCustomType: a custom kind's metadata informer caches
// PartialObjectMetadata of kind Widget, without spec.
func TestForMetadataCustomType(t *testing.T) {
	cluster := newFakeCluster(t, widgetScheme(), typedWidget("a", "w", 42, nil))
	clients, _ := metadataClients(t, cluster)
	c, err := informer.New(clients, informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.ForMetadata[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	if got := widgets.GroupVersionResource(); got != widgetGVR {
		t.Errorf("GroupVersionResource = %v, want %v", got, widgetGVR)
	}
	start(t, c)
	w, err := widgets.Lister().Get("a", "w")
	if err != nil {
		t.Fatal(err)
	}
	if w.GroupVersionKind() != widgetGVK || w.UID == "" {
		t.Errorf("cached Widget: kind %v (want %v), uid %q", w.GroupVersionKind(), widgetGVK, w.UID)
	}
	if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w); err != nil || u["spec"] != nil {
		t.Errorf("cached Widget = %v, %v; want metadata only", u, err)
	}
}
