package protolist

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newConfigMap() Item { return &corev1.ConfigMap{} }

// configMaps is a list of n ConfigMaps with labels, data and binary data,
// and a continue token.
func configMaps(n int) *corev1.ConfigMapList {
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "4711", Continue: "next-page"}}
	for i := range n {
		l.Items = append(l.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "ns", ResourceVersion: fmt.Sprint(100 + i),
				Labels: map[string]string{"app": "x", "i": fmt.Sprint(i)}},
			Data:       map[string]string{"value": strings.Repeat("v", i*37)},
			BinaryData: map[string][]byte{"bin": {0, byte(i), 0xff}},
		})
	}
	return l
}

// encode encodes obj as kube-apiserver answers in protobuf.
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(kubescheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	b, err := runtime.Encode(kubescheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecode: a protobuf list decodes to what apimachinery's own decoder
// makes of it, read all at once or one byte at a time, and client-go's
// reflector and pager can read it: its ListMeta through meta.ListAccessor,
// its items through meta.ExtractListWithAlloc (each item its own value, not
// copied again) and meta.SetList.
func TestDecode(t *testing.T) {
	for _, n := range []int{0, 1, 50} {
		want := configMaps(n)
		body := encode(t, want)
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "byte by byte": iotest.OneByteReader(bytes.NewReader(body))} {
			t.Run(fmt.Sprintf("%d items, %s", n, name), func(t *testing.T) {
				got, err := Decode(r, Hooks{New: newConfigMap})
				if err != nil {
					t.Fatal(err)
				}
				lm, err := meta.ListAccessor(got)
				if err != nil {
					t.Fatal(err)
				}
				if lm.GetResourceVersion() != "4711" || lm.GetContinue() != "next-page" {
					t.Errorf("list metadata: resourceVersion %q, continue %q; want 4711, next-page", lm.GetResourceVersion(), lm.GetContinue())
				}
				items, err := meta.ExtractListWithAlloc(got)
				if err != nil {
					t.Fatal(err)
				}
				if len(items) != n {
					t.Fatalf("%d items, want %d", len(items), n)
				}
				for i, o := range items {
					if o != got.Items[i] {
						t.Errorf("item %d was copied out of the list", i)
					}
					if !apiequality.Semantic.DeepEqual(o, &want.Items[i]) {
						t.Errorf("item %d: got %+v, want %+v", i, o, &want.Items[i])
					}
				}
				if err := meta.SetList(got, items[:n/2]); err != nil || len(got.Items) != n/2 {
					t.Errorf("meta.SetList: %v, %d items; want %d", err, len(got.Items), n/2)
				}
			})
		}
	}
}

// TestDecodeTruncated: a body cut anywhere inside the list is an error,
// never a shorter list.
func TestDecodeTruncated(t *testing.T) {
	body := encode(t, configMaps(3))
	end := listEnd(t, body)
	for cut := 0; cut < end; cut++ {
		if l, err := Decode(bytes.NewReader(body[:cut]), Hooks{New: newConfigMap}); err == nil {
			t.Fatalf("cut at %d of %d bytes: decoded %d items, want an error", cut, len(body), len(l.Items))
		}
	}
}

// listEnd returns where, in a protobuf body, the list (the Unknown's Raw
// field, which the encoder writes second after TypeMeta) ends.
func listEnd(t *testing.T, body []byte) int {
	t.Helper()
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(magic):]); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(body, u.Raw)
	if i < 0 {
		t.Fatal("the list's bytes are not in the body")
	}
	return i + len(u.Raw)
}

// TestDecodeRejects: bodies that are not a plain protobuf list fail with an
// error that says what was wrong.
func TestDecodeRejects(t *testing.T) {
	list, err := configMaps(2).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(u runtime.Unknown) []byte {
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(bytes.Clone(magic), b...)
	}
	badItem := bytes.Clone(encode(t, configMaps(2)))
	// The second item's first field key (its ObjectMeta) made an invalid
	// wire type: the item no longer decodes.
	second, err := configMaps(2).Items[1].Marshal()
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(badItem, second)
	badItem[at] = 0x0f
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"JSON":             {[]byte(`{"kind":"ConfigMapList","items":[]}`), "not protobuf"},
		"content encoding": {wrap(runtime.Unknown{Raw: list, ContentEncoding: "gzip"}), `content encoding "gzip"`},
		"no list":          {wrap(runtime.Unknown{ContentType: runtime.ContentTypeProtobuf}), "holds no object"},
		"bad item":         {badItem, "item 1 of the list"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(c.body), Hooks{New: newConfigMap})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestIsProtobuf: IsProtobuf tells protobuf from JSON without consuming
// anything.
func TestIsProtobuf(t *testing.T) {
	body := encode(t, configMaps(1))
	r := bufio.NewReader(bytes.NewReader(body))
	if !IsProtobuf(r) {
		t.Error("a protobuf body is not protobuf")
	}
	if l, err := Decode(r, Hooks{New: newConfigMap}); err != nil || len(l.Items) != 1 {
		t.Errorf("decoding after IsProtobuf: %v", err)
	}
	if IsProtobuf(bufio.NewReader(strings.NewReader(`{"kind":"ConfigMapList"}`))) {
		t.Error("a JSON body is protobuf")
	}
	if IsProtobuf(bufio.NewReader(strings.NewReader("k8"))) {
		t.Error("a 2-byte body is protobuf")
	}
}

// TestDecodeDiscard: with Discard, every item reaches Decoded, decoded
// into the one value New returns, and none is kept in the list.
func TestDecodeDiscard(t *testing.T) {
	want := configMaps(20)
	scratch := &corev1.ConfigMap{}
	var names []string
	got, err := Decode(bytes.NewReader(encode(t, want)), Hooks{
		New: func() Item {
			*scratch = corev1.ConfigMap{}
			return scratch
		},
		Decoded: func(it Item) {
			if it != Item(scratch) {
				t.Errorf("Decoded got %p, want the scratch value %p", it, scratch)
			}
			names = append(names, scratch.Name)
		},
		Discard: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 0 || got.Continue != "next-page" {
		t.Errorf("list: %d items, continue %q; want none, next-page", len(got.Items), got.Continue)
	}
	if len(names) != 20 || names[0] != "cm-0" || names[19] != "cm-19" {
		t.Errorf("Decoded saw %q, want cm-0 to cm-19", names)
	}
}
