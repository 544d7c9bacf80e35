package wire

import (
	"fmt"
	"testing"
)

// BenchmarkDecoder decodes a Pod as a watch event's object and takes its
// payload, as the store does: the envelope read is a small part of it.
func BenchmarkDecoder(b *testing.B) {
	d := decoder(b)
	p := pod("bench")
	for i := range 20 {
		p.Labels[fmt.Sprint("label-", i)] = "value"
	}
	body := encodeAsServer(b, p)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		obj, _, err := d.Decode(body, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := Take(obj); !ok {
			b.Fatal("no payload")
		}
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
