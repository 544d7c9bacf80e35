package wire

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// plainAndPayloadDecoders returns the decoder client-go's REST client uses
// for a protobuf response of gv, and the Decoder the factories use, which
// decodes objects from their payload in place.
func plainAndPayloadDecoders(gv schema.GroupVersion) (plain, payload kruntime.Decoder) {
	info, _ := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	codecs := scheme.Codecs.WithoutConversion()
	plain = codecs.DecoderToVersion(info.Serializer, gv)
	payload = NegotiatedSerializer{NegotiatedSerializer: codecs, Creater: scheme.Scheme}.DecoderToVersion(info.Serializer, gv)
	return plain, payload
}

// checkSameDecode decodes data with both decoders and fails unless they
// return the same object, kind and error.
func checkSameDecode(t *testing.T, plain, payload kruntime.Decoder, data []byte, what string) {
	t.Helper()
	want, wantGVK, wantErr := plain.Decode(data, nil, nil)
	got, gotGVK, gotErr := payload.Decode(data, nil, nil)
	if got != nil {
		Forget(got)
	}
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: error %v, the serializer's %v", what, gotErr, wantErr)
	}
	if !reflect.DeepEqual(gotGVK, wantGVK) {
		t.Fatalf("%s: kind %v, the serializer's %v", what, gotGVK, wantGVK)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded %#v, the serializer %#v", what, got, want)
	}
}

// A Decoder decodes every object as client-go's protobuf decoder does, to
// the same object, kind and error, whichever way it takes. This generator
// fills objects of every kind of client-go's scheme at random, encodes
// each as the apiserver does, and compares both decoders on the whole
// message and on every cut of it.
func TestDecoderDecodesAsTheSerializer(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	fill := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs), rand.NewSource(seed), scheme.Codecs)
	info, _ := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	kinds := 0
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == kruntime.APIVersionInternal {
			continue
		}
		plain, payload := plainAndPayloadDecoders(gvk.GroupVersion())
		for n := range 3 {
			obj, err := scheme.Scheme.New(gvk)
			if err != nil {
				t.Fatal(err)
			}
			fill.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			data, err := kruntime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gvk.GroupVersion()), obj)
			if err != nil {
				continue // not encodable as protobuf
			}
			kinds++
			what := fmt.Sprintf("%v #%d", gvk, n)
			checkSameDecode(t, plain, payload, data, what)
			if n == 0 {
				for cut := range len(data) {
					checkSameDecode(t, plain, payload, data[:cut], fmt.Sprintf("%s cut at %d of %d bytes", what, cut, len(data)))
				}
			}
		}
	}
	if kinds < 100 {
		t.Fatalf("only %d objects encoded as protobuf", kinds)
	}
	t.Logf("%d objects of every kind", kinds)
}

// FuzzDecoderDecodesAsTheSerializer compares both decoders on any message.
func FuzzDecoderDecodesAsTheSerializer(f *testing.F) {
	plain, payload := plainAndPayloadDecoders(metav1.SchemeGroupVersion)
	body := encodeAsServer(f, pod("a"))
	f.Add(body)
	raw, _ := pod("b").Marshal()
	for _, u := range []kruntime.Unknown{
		{Raw: raw},
		{Raw: raw, ContentEncoding: "gzip"},
		{TypeMeta: kruntime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw, ContentType: "application/json"},
		{TypeMeta: kruntime.TypeMeta{APIVersion: "v1", Kind: "Secret"}, Raw: raw},
		{TypeMeta: kruntime.TypeMeta{APIVersion: "v1", Kind: "NoSuchKind"}, Raw: raw},
		{TypeMeta: kruntime.TypeMeta{Kind: "Pod"}, Raw: raw},
		{TypeMeta: kruntime.TypeMeta{APIVersion: "v1", Kind: "Pod"}},
	} {
		b, _ := u.Marshal()
		f.Add(append([]byte(Prefix), b...))
	}
	// Raw twice, then the TypeMeta twice: the last raw and each field's last
	// value count.
	f.Add(append(slices.Clone(body), 0x12, 0x02, 0x0a, 0x00, 0x0a, 0x04, 0x12, 0x02, 'N', 's'))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameDecode(t, plain, payload, data, "fuzzed message")
	})
}

// A watch event's object is decoded from its payload in place: the
// serializer's runtime.Unknown would copy the payload out of the event
// first, as many bytes as the object's message, for every event.
func TestDecoderCopiesNoPayload(t *testing.T) {
	plain, payload := plainAndPayloadDecoders(metav1.SchemeGroupVersion)
	p := pod("a")
	p.Annotations = map[string]string{"big": string(make([]byte, 64<<10))}
	data := encodeAsServer(t, p)
	allocated := func(d kruntime.Decoder) uint64 {
		const n = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			obj, _, err := d.Decode(data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			Forget(obj)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	plainBytes, payloadBytes := allocated(plain), allocated(payload)
	if payloadBytes+uint64(len(data))*9/10 > plainBytes {
		t.Fatalf("decoding a %d-byte event allocates %d bytes, the serializer %d: want at least the event's size less", len(data), payloadBytes, plainBytes)
	}
}
