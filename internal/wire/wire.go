// Package wire keeps, for objects decoded from a protobuf response, the
// bytes the server encoded the object as, so that the persistent informer
// can store those instead of marshalling the object again: a watch update
// then costs one protobuf decode, as in client-go, rather than a decode and
// an encode.
//
// A Decoder (see NegotiatedSerializer) remembers each object it decodes with
// its payload; the store takes it (Take) when it writes the object. Objects
// are looked up by identity: the payload is the server's encoding of exactly
// the state decoded into that object, and stays true while nothing changes
// the object, which is why the store takes payloads only when no transform
// runs between the decoder and the store. The payloads of objects never
// stored (a watch stopped, an object filtered out) are forgotten when newer
// ones need their room: at most Capacity are kept.
package wire

import (
	"bytes"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Capacity is how many payloads are kept, taken or not: enough for the
// events a busy informer has decoded and not yet stored (client-go's queue
// between them is unbounded, but rarely deep), small enough that the
// payloads of objects never stored cost little (a few MB).
const Capacity = 1024

// protobufPrefix starts every object the apiserver encodes as protobuf
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf, protoEncodingPrefix):
// a runtime.Unknown follows, whose Raw is the object's own message.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// payloads holds the remembered payloads: entries by object, and ring, the
// objects in the order remembered, to forget the oldest when full.
var payloads = struct {
	sync.Mutex
	entries map[runtime.Object]entry
	ring    [Capacity]runtime.Object
	next    int
}{entries: map[runtime.Object]entry{}}

type entry struct {
	payload []byte
	slot    int
}

// Counters of Take, for tests and benchmarks.
var taken, missed atomic.Int64

// remember keeps payload as obj's.
func remember(obj runtime.Object, payload []byte) {
	p := &payloads
	p.Lock()
	defer p.Unlock()
	if old := p.ring[p.next]; old != nil {
		delete(p.entries, old)
	}
	p.ring[p.next] = obj
	p.entries[obj] = entry{payload: payload, slot: p.next}
	p.next = (p.next + 1) % Capacity
}

// Take returns, and forgets, the payload a Decoder remembered for obj: the
// protobuf message obj was decoded from, as the server encoded it. The
// caller must know obj has not been changed since it was decoded.
func Take(obj runtime.Object) ([]byte, bool) {
	p := &payloads
	p.Lock()
	defer p.Unlock()
	e, ok := p.entries[obj]
	if !ok {
		missed.Add(1)
		return nil, false
	}
	delete(p.entries, obj)
	p.ring[e.slot] = nil
	taken.Add(1)
	return e.payload, true
}

// Forget drops obj's payload, if any: for a store that will not take it.
func Forget(obj runtime.Object) {
	p := &payloads
	p.Lock()
	defer p.Unlock()
	if e, ok := p.entries[obj]; ok {
		delete(p.entries, obj)
		p.ring[e.slot] = nil
	}
}

// Stats returns how many Takes found a payload and how many did not.
func Stats() (found, notFound int64) { return taken.Load(), missed.Load() }

// Decoder decodes as its inner decoder does and remembers, for each object
// decoded from protobuf that is not a list, the object's message.
type Decoder struct{ runtime.Decoder }

// Decode implements runtime.Decoder.
func (d Decoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err != nil || obj == nil || !bytes.HasPrefix(data, protobufPrefix) {
		return obj, gvk, err
	}
	if _, isList := obj.(metav1.ListInterface); isList {
		return obj, gvk, err
	}
	if raw, ok := unknownRaw(data[len(protobufPrefix):]); ok {
		remember(obj, raw)
	}
	return obj, gvk, err
}

// unknownRaw returns the Raw field of a runtime.Unknown message, a slice of
// msg (no copy: client-go's watch decoder hands each event's object in a
// buffer of its own, restclientwatch.Decoder unmarshalling a new
// metav1.WatchEvent per event, which TestPayloadsOutliveTheNextEvent
// checks), if the message parses and its content is not further encoded.
// The fields (k8s.io/apimachinery/pkg/runtime/generated.proto): 1 typeMeta,
// 2 raw, 3 contentEncoding, 4 contentType, all length-delimited.
func unknownRaw(msg []byte) (raw []byte, ok bool) {
	for len(msg) > 0 {
		tag, n := uvarint(msg)
		if n <= 0 || tag&7 != 2 { // every field is length-delimited
			return nil, false
		}
		msg = msg[n:]
		size, n := uvarint(msg)
		if n <= 0 || size > uint64(len(msg)-n) {
			return nil, false
		}
		field := msg[n : n+int(size)]
		msg = msg[n+int(size):]
		switch tag >> 3 {
		case 2:
			raw = field
		case 3:
			if len(field) > 0 {
				return nil, false // gzip or the like: not the object's message
			}
		}
	}
	return raw, len(raw) > 0
}

// uvarint decodes a protobuf varint: the value and its length, or n <= 0.
func uvarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// NegotiatedSerializer wraps a client's serializer so that the decoders it
// makes for responses are Decoders.
type NegotiatedSerializer struct{ runtime.NegotiatedSerializer }

// DecoderToVersion implements runtime.NegotiatedSerializer.
func (s NegotiatedSerializer) DecoderToVersion(decoder runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return Decoder{s.NegotiatedSerializer.DecoderToVersion(decoder, gv)}
}
