package fake_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

const (
	protobufType = "application/vnd.kubernetes.protobuf"
	// protobufAccept is what production clients of built-in types send.
	protobufAccept = "application/vnd.kubernetes.protobuf,application/json"
)

// contentTypeLog records the Content-Type of every answer that passes.
type contentTypeLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string][]string // "GET list" and the like: the Content-Types
}

func (l *contentTypeLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		key := req.Method
		if req.URL.Query().Get("watch") == "true" {
			key += " watch"
		}
		l.seen[key] = append(l.seen[key], resp.Header.Get("Content-Type"))
	}
	return resp, err
}

// requests returns the requests seen, by method (and watch), with the
// Content-Types they were answered in.
func (l *contentTypeLog) requests() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]string, len(l.seen))
	for k, v := range l.seen {
		out[k] = slices.Clone(v)
	}
	return out
}

// protobufClientset returns a clientset on c configured as production
// clients of built-in types are: protobuf bodies, protobuf preferred in
// answers; and the log of the Content-Types answered.
func protobufClientset(t *testing.T, c *fake.Cluster) (kubernetes.Interface, *contentTypeLog) {
	t.Helper()
	log := &contentTypeLog{next: c, seen: map[string][]string{}}
	cfg := c.Config()
	cfg.Transport = log
	cfg.ContentType = protobufType
	cfg.AcceptContentTypes = protobufAccept
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cs, log
}

// checkAllProtobuf fails unless every answer in log was protobuf, and
// there was one for each of verbs.
func checkAllProtobuf(t *testing.T, log *contentTypeLog, verbs ...string) {
	t.Helper()
	seen := log.requests()
	for _, v := range verbs {
		if len(seen[v]) == 0 {
			t.Errorf("no %s request was answered", v)
		}
	}
	for v, cts := range seen {
		want := protobufType
		if v == "GET watch" {
			want += ";stream=watch"
		}
		for _, ct := range cts {
			if ct != want {
				t.Errorf("a %s was answered in %q, want %q", v, ct, want)
			}
		}
	}
}

// TestProtobufClientset checks a typed clientset that sends and prefers
// protobuf, as production clients do: every answer is protobuf, and get,
// list, watch, create, update and delete of ConfigMaps and Pods see the
// objects they should.
func TestProtobufClientset(t *testing.T) {
	c := newCluster(t, configMap("ns", "seed", map[string]string{"k": "v"}))
	cs, log := protobufClientset(t, c)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")

	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, err := cms.Get(ctx, "seed", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" || got.UID == "" {
		t.Fatalf("Get = %+v, %v; want the seeded ConfigMap", got, err)
	}
	created, err := cms.Create(ctx, configMap("ns", "a", map[string]string{"x": "1"}), metav1.CreateOptions{})
	if err != nil || created.Data["x"] != "1" || created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("Create = %+v, %v; want the stored ConfigMap", created, err)
	}
	if body := c.Writes()[0].Body; !bytes.HasPrefix(body, []byte("{")) {
		t.Errorf("the create's protobuf body is recorded as %q, want it as JSON", body)
	}
	created.Data["x"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil || updated.Data["x"] != "2" || rv(t, updated) <= rv(t, created) {
		t.Fatalf("Update = %+v, %v; want the new data at a newer resourceVersion", updated, err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); !slices.Equal(got, []string{"ns/a", "ns/seed"}) || list.ResourceVersion != updated.ResourceVersion {
		t.Errorf("List = %v at %s, want [ns/a ns/seed] at %s", got, list.ResourceVersion, updated.ResourceVersion)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
	var events []string
	for range 3 {
		events = append(events, describe(next(t, w)))
	}
	if want := []string{"ADDED a@2", "MODIFIED a@3", "DELETED a@4"}; !slices.Equal(events, want) {
		t.Errorf("watch = %v, want %v", events, want)
	}

	pods := cs.CoreV1().Pods("ns")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gotPod, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil || len(gotPod.Spec.Containers) != 1 || gotPod.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("Get pod = %+v, %v; want the created Pod", gotPod, err)
	}
	gotPod.Spec.Containers[0].Image = "nginx"
	if gotPod, err = pods.Update(ctx, gotPod, metav1.UpdateOptions{}); err != nil || gotPod.Spec.Containers[0].Image != "nginx" {
		t.Fatalf("Update pod = %+v, %v", gotPod, err)
	}
	gotPod.Status.Phase = corev1.PodRunning
	if gotPod, err = pods.UpdateStatus(ctx, gotPod, metav1.UpdateOptions{}); err != nil || gotPod.Status.Phase != corev1.PodRunning {
		t.Fatalf("UpdateStatus pod = %+v, %v", gotPod, err)
	}
	podList, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil || len(podList.Items) != 1 || podList.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("List pods = %+v, %v; want the one Pod, running", podList, err)
	}
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAllProtobuf(t, log, "GET", "GET watch", "POST", "PUT", "DELETE")
}

// TestProtobufWire checks the bytes: an object, a list and an error are
// "k8s\x00" and a runtime.Unknown, as apimachinery's protobuf serializer
// reads them; a watch is a sequence of
// frames, each a 4-byte big-endian length and a metav1.WatchEvent whose
// object is a protobuf-encoded object; a protobuf request body is
// accepted.
func TestProtobufWire(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", map[string]string{"k": "v"}))
	decoder := kubescheme.Codecs.UniversalDeserializer()
	magic := []byte("k8s\x00")

	code, ct, body := send(t, c, "GET", "/api/v1/namespaces/ns/configmaps/a", protobufAccept, "", nil)
	obj, gvk, err := decoder.Decode(body, nil, nil)
	if code != http.StatusOK || ct != protobufType || !bytes.HasPrefix(body, magic) || err != nil {
		t.Fatalf("GET = %d %s %q (%v), want 200 and a protobuf ConfigMap", code, ct, body, err)
	}
	if cm, ok := obj.(*corev1.ConfigMap); !ok || *gvk != corev1.SchemeGroupVersion.WithKind("ConfigMap") || cm.Data["k"] != "v" {
		t.Errorf("GET decoded to %v %+v, want the ConfigMap", gvk, obj)
	}

	code, ct, body = send(t, c, "GET", "/api/v1/namespaces/ns/configmaps", protobufAccept, "", nil)
	obj, gvk, err = decoder.Decode(body, nil, nil)
	if code != http.StatusOK || ct != protobufType || err != nil {
		t.Fatalf("LIST = %d %s (%v), want 200 and a protobuf ConfigMapList", code, ct, err)
	}
	if l, ok := obj.(*corev1.ConfigMapList); !ok || *gvk != corev1.SchemeGroupVersion.WithKind("ConfigMapList") || len(l.Items) != 1 || l.ResourceVersion != "1" {
		t.Errorf("LIST decoded to %v %+v, want a ConfigMapList of one at resourceVersion 1", gvk, obj)
	}

	code, ct, body = send(t, c, "GET", "/api/v1/namespaces/ns/configmaps/missing", protobufAccept, "", nil)
	if s := decodeStatus(t, ct, body); code != http.StatusNotFound || ct != protobufType || s.Reason != metav1.StatusReasonNotFound {
		t.Errorf("GET of a missing object = %d %s %+v, want 404 and a protobuf Status NotFound", code, ct, s)
	}

	var in bytes.Buffer
	newCM := configMap("ns", "b", map[string]string{"x": "y"})
	newCM.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(newCM, &in); err != nil {
		t.Fatal(err)
	}
	code, ct, body = send(t, c, "POST", "/api/v1/namespaces/ns/configmaps", protobufAccept, protobufType, in.Bytes())
	obj, _, err = decoder.Decode(body, nil, nil)
	if cm, ok := obj.(*corev1.ConfigMap); code != http.StatusCreated || ct != protobufType || err != nil || !ok || cm.Data["x"] != "y" || cm.UID == "" {
		t.Errorf("POST of a protobuf body = %d %s %+v (%v), want 201 and the created ConfigMap in protobuf", code, ct, obj, err)
	}

	// The watch, framed by hand.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := do(t, ctx, c, "GET", "/api/v1/namespaces/ns/configmaps?watch=true", protobufAccept, "", nil)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != protobufType+";stream=watch" {
		t.Errorf("watch Content-Type %q, want %s;stream=watch", ct, protobufType)
	}
	var got []string
	for range 2 {
		var n uint32
		if err := binary.Read(resp.Body, binary.BigEndian, &n); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, frame); err != nil {
			t.Fatal(err)
		}
		var e metav1.WatchEvent
		if err := e.Unmarshal(frame); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		obj, _, err := decoder.Decode(e.Object.Raw, nil, nil)
		cm, ok := obj.(*corev1.ConfigMap)
		if err != nil || !ok || !bytes.HasPrefix(e.Object.Raw, magic) {
			t.Fatalf("event %s object %q: %v %v, want a protobuf ConfigMap", e.Type, e.Object.Raw, obj, err)
		}
		got = append(got, e.Type+" "+cm.Name)
	}
	if want := []string{"ADDED a", "ADDED b"}; !slices.Equal(got, want) {
		t.Errorf("watch events %v, want %v", got, want)
	}
}

// TestCustomKindContentTypes checks that a custom kind, which has no
// protobuf encoding, is answered in JSON when the client also accepts
// JSON, and 406 Not Acceptable when it accepts protobuf only, as
// kube-apiserver answers for custom resources.
func TestCustomKindContentTypes(t *testing.T) {
	c := newCluster(t, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}})
	for _, path := range []string{"/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/w", "/apis/test.ctrlkit.io/v1/namespaces/ns/widgets", "/apis/test.ctrlkit.io/v1/widgets?watch=true"} {
		ctx, cancel := context.WithCancel(t.Context())
		resp := do(t, ctx, c, "GET", path, protobufAccept, "", nil)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
			t.Errorf("GET %s, Accept %s = %d %s, want 200 application/json", path, protobufAccept, resp.StatusCode, ct)
		}
		resp.Body.Close()
		cancel()

		// kube-apiserver encodes the error in protobuf: custom resources'
		// serializers have protobuf, for Status and PartialObjectMetadata.
		code, ct, body := send(t, c, "GET", path, protobufType, "", nil)
		if s := decodeStatus(t, ct, body); code != http.StatusNotAcceptable || ct != protobufType || s.Reason != metav1.StatusReasonNotAcceptable {
			t.Errorf("GET %s, Accept %s = %d %s %+v, want 406 NotAcceptable in protobuf", path, protobufType, code, ct, s)
		}
	}
	code, ct, body := send(t, c, "GET", "/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/missing", protobufAccept, "", nil)
	if s := decodeStatus(t, ct, body); code != http.StatusNotFound || s.Reason != metav1.StatusReasonNotFound {
		t.Errorf("GET of a missing Widget = %d %+v, want 404 NotFound", code, s)
	}
}

// TestAcceptNegotiation checks the choice among the Accept header's
// clauses, as kube-apiserver makes it.
func TestAcceptNegotiation(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", nil))
	for _, tc := range []struct {
		accept, want string // want "": 406
	}{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/json", "application/json"},
		{"application/vnd.kubernetes.protobuf, */*", protobufType},
		{"application/json;q=0.5,application/vnd.kubernetes.protobuf", protobufType},
		{"application/yaml", ""}, // the fake does not answer in YAML
		{"application/yaml,application/json;q=0.9", "application/json"},
		{"application/*", "application/json"},
		{"application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json", "application/json"},
		{"text/html", ""},
	} {
		code, ct, body := send(t, c, "GET", "/api/v1/namespaces/ns/configmaps/a", tc.accept, "", nil)
		switch {
		case tc.want == "":
			if s := decodeStatus(t, ct, body); code != http.StatusNotAcceptable || ct != "application/json" || s.Reason != metav1.StatusReasonNotAcceptable {
				t.Errorf("Accept %q: %d %s %+v, want 406 NotAcceptable in JSON", tc.accept, code, ct, s)
			}
		case code != http.StatusOK || ct != tc.want:
			t.Errorf("Accept %q: %d %s, want 200 %s", tc.accept, code, ct, tc.want)
		}
	}
}

// do sends a request to c with the given Accept and Content-Type headers
// (none if empty) and returns the response.
func do(t testing.TB, ctx context.Context, c *fake.Cluster, method, path, accept, contentType string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, fake.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send is do for a request that is not a watch: it returns the status
// code, the Content-Type and the body.
func send(t testing.TB, c *fake.Cluster, method, path, accept, contentType string, body []byte) (int, string, []byte) {
	t.Helper()
	resp := do(t, t.Context(), c, method, path, accept, contentType, body)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// decodeStatus decodes a metav1.Status in the media type ct.
func decodeStatus(t testing.TB, ct string, body []byte) metav1.Status {
	t.Helper()
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatalf("Content-Type %q: %v", ct, err)
	}
	info, ok := runtime.SerializerInfoForMediaType(kubescheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("Content-Type %q is not one apimachinery decodes", ct)
	}
	var s metav1.Status
	if _, _, err := info.Serializer.Decode(body, nil, &s); err != nil {
		t.Fatalf("decoding a Status from %q (%s): %v", body, ct, err)
	}
	return s
}

// watchRaw watches path with the Accept header and returns its first n
// events, decoded with apimachinery's codecs for meta.k8s.io and
// client-go's types as client-go's watch decoder does.
func watchRaw(t *testing.T, c *fake.Cluster, path, accept string, n int) []watchEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	resp := do(t, ctx, c, "GET", path, accept, "", nil)
	defer resp.Body.Close()
	mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if mediaType == protobufType && params["stream"] != "watch" {
		t.Errorf("watch %s: Content-Type %q, want stream=watch", path, resp.Header.Get("Content-Type"))
	}
	info, ok := runtime.SerializerInfoForMediaType(kubescheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("watch %s: Content-Type %q has no stream decoder", path, mediaType)
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(resp.Body)
	d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), metaOrKube{})
	var out []watchEvent
	for range n {
		typ, obj, err := d.Decode()
		if err != nil {
			t.Fatalf("watch %s: %v", path, err)
		}
		out = append(out, watchEvent{Type: string(typ), Object: obj})
	}
	return out
}

type watchEvent struct {
	Type   string
	Object runtime.Object
}

// metaOrKube decodes meta.k8s.io types with the meta codecs, others with
// client-go's.
type metaOrKube struct{}

func (metaOrKube) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if obj, gvk, err := metainternalversionscheme.Codecs.UniversalDeserializer().Decode(data, defaults, into); err == nil {
		return obj, gvk, nil
	}
	return kubescheme.Codecs.UniversalDeserializer().Decode(data, defaults, into)
}
