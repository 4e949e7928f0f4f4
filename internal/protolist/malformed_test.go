package protolist

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// uv is the varint encoding of v.
func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// body is the magic bytes and then parts.
func body(parts ...[]byte) []byte { return bytes.Join(append([][]byte{magic}, parts...), nil) }

// TestDecodeHugeLength: a length read from the wire that is more than
// the body holds is an error, not an allocation of that length (this
// 12-byte body, hugeBody, declares a ContentEncoding of about 200 TB and
// used to end the process with "fatal error: out of memory").
func TestDecodeHugeLength(t *testing.T) {
	if l, err := Decode(bytes.NewReader(hugeBody), Hooks{New: newConfigMap}); err == nil {
		t.Fatalf("decoded %d items, want an error", len(l.Items))
	}
}

// TestDecodeMalformed: malformed bodies are errors, and Decode allocates
// for a length read from the wire no more than has arrived, give or take
// a fixed bound.
func TestDecodeMalformed(t *testing.T) {
	item := bytes.Repeat([]byte{'x'}, 1<<20)
	for name, b := range map[string][]byte{
		"type of 1 TB":                     body([]byte{0x0a}, uv(1<<40)),
		"list of 1 PB, item of 512 TB":     body([]byte{0x12}, uv(1<<50), []byte{0x12}, uv(1<<49)),
		"list of 1 PB, metadata of 512 TB": body([]byte{0x12}, uv(1<<50), []byte{0x0a}, uv(1<<49)),
		"item of 64 MiB, 1 MiB sent":       body([]byte{0x12}, uv(64<<20+8), []byte{0x12}, uv(64<<20), item),
		"unknown field of 1 EB":            body([]byte{0x2a}, uv(1<<60)),
		"negative length":                  body([]byte{0x12}, uv(1<<63)),
		"item longer than the list":        body([]byte{0x12, 0x02, 0x12, 0x05, 0, 0, 0, 0, 0}),
		"varint of 11 bytes":               body(bytes.Repeat([]byte{0x80}, 10), []byte{0x01}),
		"truncated key":                    body([]byte{0x92}),
		"list as a varint":                 body([]byte{0x10, 0x01}),
		"item as a varint":                 body([]byte{0x12, 0x02, 0x10, 0x01}),
		"field number 0":                   body([]byte{0x02, 0x00}),
		"field number 0 as int32":          body(uv(1<<35|2), []byte{0x00}),
		"end of group":                     body([]byte{0x2c}),
		"unterminated group":               body([]byte{0x2b, 0x08, 0x01}),
		"group past the list":              body([]byte{0x12, 0x02, 0x2b, 0x08, 0x01, 0x2c}),
		"wire type 7":                      body([]byte{0x2f}),
		"two lists":                        body([]byte{0x12, 0x00, 0x12, 0x00}),
		"bad type":                         body([]byte{0x0a, 0x02, 0x08, 0x01}),
	} {
		t.Run(name, func(t *testing.T) {
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			l, err := Decode(bytes.NewReader(b), Hooks{New: newConfigMap})
			goruntime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("decoded %d items, want an error", len(l.Items))
			}
			if !strings.HasPrefix(err.Error(), "reading the protobuf list: ") {
				t.Errorf("error %q", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(b))*2+4<<20 {
				t.Errorf("%d bytes allocated for a body of %d", n, len(b))
			}
		})
	}
}

// TestDecodeAsGenerated: what apimachinery's generated decoders take in
// an unusual encoding, Decode takes the same way: unknown groups (ended
// by an end of group of any number), keys whose field number is read as
// an int32, varints of 10 bytes whose bits past 64 are dropped, repeated
// list metadata, which merges.
func TestDecodeAsGenerated(t *testing.T) {
	list, err := configMaps(2).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	group := []byte{0x4b, 0x08, 0x01, 0x53, 0x0d, 1, 2, 3, 4, 0x5c, 0x4c}                // 9 { 1: 1, 10 { 1: fixed32 } end 11 } end 9
	key2 := append(uv(1<<35|2<<3|2), uv(0)...)                                           // an empty item: field 2 as an int32
	overflow := []byte{0x92, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7e, 0x00} // an empty item: the key's 10th byte overflows
	meta := []byte{0x0a, 0x03, 0x12, 0x01, 'z'}                                          // ListMeta{ResourceVersion: "z"}
	raw := bytes.Join([][]byte{group, list, key2, overflow, meta}, nil)
	b := body([]byte{0x0a, 0x00}, group, []byte{0x12}, uv(uint64(len(raw))), raw, []byte{0x22, 0x00}, group)
	want, _, err := wantList(b)
	if err != nil {
		t.Fatalf("apimachinery: %v", err)
	}
	got, err := Decode(bytes.NewReader(b), Hooks{New: newConfigMap})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 4 || len(want.Items) != 4 || got.ResourceVersion != "z" || got.Continue != "next-page" {
		t.Fatalf("%d items, %+v; apimachinery %d items", len(got.Items), got.ListMeta, len(want.Items))
	}
	if !apiequality.Semantic.DeepEqual(got.ListMeta, want.ListMeta) {
		t.Errorf("list metadata %+v, apimachinery's %+v", got.ListMeta, want.ListMeta)
	}
	for i := range got.Items {
		if !apiequality.Semantic.DeepEqual(got.Items[i], &want.Items[i]) {
			t.Errorf("item %d: %+v, apimachinery's %+v", i, got.Items[i], &want.Items[i])
		}
	}
}

// TestPagesMetadataInParts: a page whose metadata comes in several parts
// (Meta is called with each) asks for the next page once; a page whose
// token changes after the next page was asked for fails the list.
func TestPagesMetadataInParts(t *testing.T) {
	for _, last := range []string{"2", "3"} {
		var requests []string
		page := func(ctx context.Context, opts metav1.ListOptions, meta func(*metav1.ListMeta)) (runtime.Object, error) {
			requests = append(requests, opts.Continue)
			l := &List{}
			if opts.Continue == "" {
				for _, c := range []string{"2", "2", last} {
					l.Continue = c
					meta(&l.ListMeta)
				}
			}
			l.Items = []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(len(requests))}}}
			return l, nil
		}
		l, err := Pages(t.Context(), metav1.ListOptions{Limit: 1}, 1, page)
		if last == "2" && (err != nil || len(requests) != 2 || len(l.(*List).Items) != 2) {
			t.Errorf("requests %q, %v", requests, err)
		}
		if last == "3" && (err == nil || !strings.Contains(err.Error(), `from "2" to "3"`)) {
			t.Errorf("a token changed: %v", err)
		}
	}
}
