package wire

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkDecoder decodes a Pod as a watch event's object and takes its
// payload, as the store does: the envelope read is a small part of it.
// "serializer" decodes through the protobuf serializer, as without a
// Creater; "in-place" decodes the object from its payload in place.
func BenchmarkDecoder(b *testing.B) {
	p := pod("bench")
	for i := range 20 {
		p.Labels[fmt.Sprint("label-", i)] = "value"
	}
	body := encodeAsServer(b, p)
	plain, inPlace := plainAndPayloadDecoders(corev1.SchemeGroupVersion)
	for _, v := range []struct {
		name string
		d    runtime.Decoder
	}{{"serializer", Decoder{Decoder: plain}}, {"in-place", inPlace}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := v.d.Decode(body, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := Take(obj); !ok {
					b.Fatal("no payload")
				}
			}
		})
	}
}

// BenchmarkObjectMessage reads a Pod's envelope, the Decoder's own share of
// a watch event's cost.
func BenchmarkObjectMessage(b *testing.B) {
	body := encodeAsServer(b, pod("bench"))[len(Prefix):]
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := objectMessage(body); !ok {
			b.Fatal("no object message")
		}
	}
}
