package persist_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	cbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// Run with
//
//	go test ./persist -run '^$' -bench . -benchmem -count 3
//
// BenchmarkDecode/<kind>/<codec> and BenchmarkEncode/<kind>/<codec> compare
// codecs per object. "boltinformer" is the persist codec, the whole record
// with its envelope. "protobuf" is the generated protobuf methods alone,
// the lower bound the codec builds on. "json" is encoding/json of the typed
// struct. For the unstructured kind, the payload alternatives that decided
// the codec's choice are compared. "msgpack" is vmihailenco msgpack v5 with
// loose interface decoding, which the codec stores, envelope aside. "json"
// is encoding/json with utiljson, which loses float64 2.0 to int64. "cbor"
// is apimachinery's CBOR, as the apiserver speaks it. Each reports its size
// as bytes/obj.

// protoObject is what the generated protobuf code gives every k8s.io/api type.
type protoObject interface {
	runtime.Object
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

type benchCodec struct {
	name   string
	encode func() ([]byte, error)
	decode func([]byte) (any, error)
}

type benchKind struct {
	name   string
	codecs []benchCodec
}

func typedBenchKind(name string, obj protoObject) benchKind {
	codec := persist.NewCodec(scheme.Scheme)
	typ := reflect.TypeOf(obj).Elem()
	newObj := func() protoObject { return reflect.New(typ).Interface().(protoObject) }
	return benchKind{name: name, codecs: []benchCodec{
		{
			name:   "boltinformer",
			encode: func() ([]byte, error) { return codec.Encode(obj) },
			decode: func(b []byte) (any, error) { return codec.Decode(b) },
		},
		{
			name: "protobuf",
			encode: func() ([]byte, error) {
				b := make([]byte, obj.Size())
				_, err := obj.MarshalToSizedBuffer(b)
				return b, err
			},
			decode: func(b []byte) (any, error) {
				o := newObj()
				return o, o.Unmarshal(b)
			},
		},
		{
			name:   "json",
			encode: func() ([]byte, error) { return json.Marshal(obj) },
			decode: func(b []byte) (any, error) {
				o := newObj()
				return o, json.Unmarshal(b, o)
			},
		},
	}}
}

func unstructuredBenchKind(name string, u *unstructured.Unstructured) benchKind {
	codec := persist.NewCodec(scheme.Scheme)
	return benchKind{name: name, codecs: []benchCodec{
		{
			name:   "boltinformer",
			encode: func() ([]byte, error) { return codec.Encode(u) },
			decode: func(b []byte) (any, error) { return codec.Decode(b) },
		},
		{
			name:   "json",
			encode: func() ([]byte, error) { return json.Marshal(u.Object) },
			decode: func(b []byte) (any, error) {
				m := map[string]any{}
				return m, utiljson.Unmarshal(b, &m)
			},
		},
		{
			name:   "msgpack",
			encode: func() ([]byte, error) { return msgpackMarshal(u.Object) },
			decode: func(b []byte) (any, error) { return msgpackUnmarshal(b) },
		},
		{
			name:   "cbor",
			encode: func() ([]byte, error) { return cbor.Marshal(u.Object) },
			decode: func(b []byte) (any, error) {
				m := map[string]any{}
				return m, cbor.Unmarshal(b, &m)
			},
		},
	}}
}

// msgpackMarshal encodes JSON-like content with msgpack's defaults: int64 as
// int64 (not compacted to uint, which would decode as uint64), float64 as
// float64.
func msgpackMarshal(v map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true) // deterministic records, as the codec's
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// msgpackUnmarshal decodes into JSON-like content: maps as map[string]any,
// integers as int64, floats as float64.
func msgpackUnmarshal(b []byte) (map[string]any, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.UseLooseInterfaceDecoding(true)
	m := map[string]any{}
	err := dec.Decode(&m)
	return m, err
}

func benchKinds() []benchKind {
	return []benchKind{
		typedBenchKind("Pod", fixture.Pod(1)),
		typedBenchKind("ConfigMap", fixture.ConfigMap(1)),
		typedBenchKind("Deployment", fixture.Deployment(1)),
		typedBenchKind("Node", fixture.Node(1)),
		unstructuredBenchKind("Unstructured", fixture.CustomResource(1)),
	}
}

// equalDecoded reports whether a decoded value matches the original object.
func equalDecoded(t testing.TB, kind benchKind, c benchCodec, got any) {
	t.Helper()
	var want any
	switch kind.name {
	case "Unstructured":
		want = fixture.CustomResource(1).Object
		if u, ok := got.(*unstructured.Unstructured); ok {
			got = u.Object
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s/%s does not round-trip:\n%s", kind.name, c.name, objectDiff(want, got))
		}
		return
	case "Pod":
		want = fixture.Pod(1)
	case "ConfigMap":
		want = fixture.ConfigMap(1)
	case "Deployment":
		want = fixture.Deployment(1)
	case "Node":
		want = fixture.Node(1)
	}
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Fatalf("%s/%s does not round-trip:\n%s", kind.name, c.name, objectDiff(want, got))
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, kind := range benchKinds() {
		b.Run(kind.name, func(b *testing.B) {
			for _, c := range kind.codecs {
				b.Run(c.name, func(b *testing.B) {
					rec, err := c.encode()
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.SetBytes(int64(len(rec)))
					for b.Loop() {
						if _, err := c.encode(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(rec)), "bytes/obj")
				})
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, kind := range benchKinds() {
		b.Run(kind.name, func(b *testing.B) {
			for _, c := range kind.codecs {
				b.Run(c.name, func(b *testing.B) {
					rec, err := c.encode()
					if err != nil {
						b.Fatal(err)
					}
					got, err := c.decode(rec)
					if err != nil {
						b.Fatal(err)
					}
					equalDecoded(b, kind, c, got)
					b.ReportAllocs()
					b.SetBytes(int64(len(rec)))
					for b.Loop() {
						if _, err := c.decode(rec); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(rec)), "bytes/obj")
				})
			}
		})
	}
}

// TestBenchCodecsLossless runs each benchmarked codec once on its fixture and
// checks that it round-trips, so that a benchmark never measures a lossy
// alternative. It also records which unstructured payloads keep an integral
// float64 a float64 (JSON does not; see TestCodecUnstructuredFloatsStayFloats).
func TestBenchCodecsLossless(t *testing.T) {
	for _, kind := range benchKinds() {
		for _, c := range kind.codecs {
			rec, err := c.encode()
			if err != nil {
				t.Fatalf("%s/%s: encode: %v", kind.name, c.name, err)
			}
			got, err := c.decode(rec)
			if err != nil {
				t.Fatalf("%s/%s: decode: %v", kind.name, c.name, err)
			}
			equalDecoded(t, kind, c, got)
		}
	}
	floats := map[string]any{"a": 2.0, "b": -0.5, "c": int64(2), "d": 1e6}
	for _, c := range unstructuredBenchKind("floats", &unstructured.Unstructured{Object: floats}).codecs {
		rec, err := c.encode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := c.decode(rec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if u, ok := got.(*unstructured.Unstructured); ok {
			got = u.Object
		}
		t.Logf("%-12s keeps integral float64: %v", c.name, reflect.DeepEqual(floats, got))
	}
}
