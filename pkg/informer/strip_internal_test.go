package informer

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/internal/kube"
	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// TestSlimmingDecoder: the decoders client-go's REST client and watch
// take from a slimming serializer decode protobuf objects without their
// managedFields (no transform involved) and with their labels, whose
// strings two objects share; they leave JSON to the transform, and
// decode everything else as the plain serializer does.
func TestSlimmingDecoder(t *testing.T) {
	gv := corev1.SchemeGroupVersion
	ns := slimming{NegotiatedSerializer: kube.WithoutConversion(kubescheme.Codecs), kinds: protolist.ObjectKinds(kubescheme.Scheme, gv),
		slim: protolist.Slim{ManagedFields: true, Labels: protolist.NewInterner()}}
	neg := runtime.NewClientNegotiator(ns, gv)
	stream, _, _, err := neg.StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := neg.Decoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		t.Fatal(err)
	}
	jsonDecoder, err := neg.Decoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}

	ts := metav1.NewTime(time.Unix(1700000000, 0))
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"app": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: "Update", APIVersion: "v1", Time: &ts,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)}}},
		Data: map[string]string{"k": "v"}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(cm, &buf); err != nil {
		t.Fatal(err)
	}
	want := cm.DeepCopy()
	want.ManagedFields = nil
	var values []string
	for name, d := range map[string]runtime.Decoder{"stream": stream, "response": plain} {
		obj, _, err := d.Decode(bytes.Clone(buf.Bytes()), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := obj.(*corev1.ConfigMap)
		got.TypeMeta = want.TypeMeta
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s decoder: got\n%+v\nwant\n%+v", name, got, want)
		}
		values = append(values, got.Labels["app"])
	}
	if unsafe.StringData(values[0]) != unsafe.StringData(values[1]) {
		t.Error("two objects' equal label values are two strings, want one")
	}

	js, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := jsonDecoder.Decode(js, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.ConfigMap); len(got.ManagedFields) != 1 {
		t.Errorf("JSON: managedFields %v, want them left to the transform", got.ManagedFields)
	}

	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Message: "gone", Reason: metav1.StatusReasonGone, Code: 410}
	buf.Reset()
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(status, &buf); err != nil {
		t.Fatal(err)
	}
	obj, _, err = stream.Decode(buf.Bytes(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*metav1.Status); got.Code != 410 || got.Message != "gone" {
		t.Errorf("Status decoded as %+v", got)
	}
}
