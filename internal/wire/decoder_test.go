package wire

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// encodeAsServer encodes obj as the apiserver does in a protobuf response.
func encodeAsServer(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decoder(t testing.TB) runtime.Decoder {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return NegotiatedSerializer{NegotiatedSerializer: scheme.Codecs.WithoutConversion()}.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, NodeName: "n1"},
	}
}

// A decoded object's payload is its own protobuf message: what marshalling
// the decoded object gives. It is taken once; a list's is not kept.
func TestDecoderRemembersTheObjectsMessage(t *testing.T) {
	d := decoder(t)
	obj, _, err := d.Decode(encodeAsServer(t, pod("a")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, ok := Take(obj)
	if !ok {
		t.Fatal("no payload remembered for a decoded Pod")
	}
	want, err := obj.(*corev1.Pod).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(payload, want) {
		t.Errorf("payload differs from the decoded Pod's own message (%d vs %d bytes)", len(payload), len(want))
	}
	if _, ok := Take(obj); ok {
		t.Error("a payload was taken twice")
	}
	list, _, err := d.Decode(encodeAsServer(t, &corev1.PodList{Items: []corev1.Pod{*pod("b")}}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Take(list); ok {
		t.Error("a list's payload was remembered")
	}
	// JSON carries no payload.
	json, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Take(json); ok {
		t.Error("a payload for an object the Decoder never saw")
	}
}

// At most Capacity payloads are kept: the oldest not taken are forgotten.
func TestPayloadsBounded(t *testing.T) {
	d := decoder(t)
	var objs []runtime.Object
	for i := range Capacity + 10 {
		obj, _, err := d.Decode(encodeAsServer(t, pod(fmt.Sprintf("p-%d", i))), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	if n := len(payloads.entries); n != Capacity {
		t.Errorf("%d payloads kept, want %d", n, Capacity)
	}
	if _, ok := Take(objs[0]); ok {
		t.Error("the oldest payload was kept beyond the capacity")
	}
	if _, ok := Take(objs[len(objs)-1]); !ok {
		t.Error("the newest payload was forgotten")
	}
	for _, o := range objs {
		Forget(o)
	}
	if n := len(payloads.entries); n != 0 {
		t.Errorf("%d payloads kept after Forget", n)
	}
}

// The payload is a slice of the buffer the watch decoder hands over: it must
// stay the object's message after the next event is decoded (client-go's
// restclientwatch.Decoder gives each event a buffer of its own).
func TestPayloadsOutliveTheNextEvent(t *testing.T) {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var stream bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&stream), info.StreamSerializer.Serializer)
	for _, name := range []string{"first", "second-with-a-longer-name"} {
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: encodeAsServer(t, pod(name))}}); err != nil {
			t.Fatal(err)
		}
	}
	dec := restwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(&stream)), info.StreamSerializer.Serializer), decoder(t))
	_, first, err := dec.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dec.Decode(); err != nil {
		t.Fatal(err)
	}
	payload, ok := Take(first)
	if !ok {
		t.Fatal("no payload for the first event's object")
	}
	want, _ := first.(*corev1.Pod).Marshal()
	if !bytes.Equal(payload, want) {
		t.Error("the first event's payload changed when the second was decoded")
	}
}

// objectMessage takes raw only where it is the object's own message.
func TestObjectMessageRejectsWhatIsNotTheObject(t *testing.T) {
	u := runtime.Unknown{Raw: []byte{1, 2, 3}, ContentEncoding: "gzip"}
	b, _ := u.Marshal()
	if _, ok := objectMessage(b); ok {
		t.Error("an encoded (gzip) content was taken as the object's message")
	}
	u.ContentEncoding = ""
	b, _ = u.Marshal()
	if raw, ok := objectMessage(b); !ok || !bytes.Equal(raw, u.Raw) {
		t.Errorf("objectMessage = %v, %v; want %v", raw, ok, u.Raw)
	}
	for _, bad := range [][]byte{{0x12, 0x05, 1}, {0x08, 0x01}, {0xff}} {
		if _, ok := objectMessage(bad); ok {
			t.Errorf("objectMessage(%x) parsed", bad)
		}
	}
}

// FuzzDecoder: wherever the serializer decodes an event's object as a Pod
// and the Decoder keeps a payload, the payload decodes to that Pod.
func FuzzDecoder(f *testing.F) {
	d := decoder(f)
	body := encodeAsServer(f, pod("a"))
	f.Add(body)
	raw, _ := pod("b").Marshal()
	for _, u := range []runtime.Unknown{
		{Raw: raw, ContentEncoding: "gzip"},
		{Raw: raw, ContentType: runtime.ContentTypeProtobuf},
		{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw},
	} {
		b, _ := u.Marshal()
		f.Add(append([]byte(Prefix), b...))
	}
	// Raw twice, then the TypeMeta: the last raw is the object.
	f.Add(append(slices.Clone(body), 0x12, 0x02, 0x0a, 0x00))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := d.Decode(data, nil, nil)
		if err != nil {
			return
		}
		payload, ok := Take(obj)
		got, isPod := obj.(*corev1.Pod)
		if !ok || !isPod {
			return
		}
		want := &corev1.Pod{}
		if err := want.Unmarshal(payload); err != nil {
			t.Fatalf("the payload of a decoded Pod does not decode: %v", err)
		}
		want.TypeMeta = got.TypeMeta
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("the payload decodes to another Pod than the event's")
		}
	})
}
