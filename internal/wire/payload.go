package wire

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// Capacity is how many payloads are kept, taken or not: enough for the
// events a busy informer has decoded and not yet stored. client-go's queue
// between them is unbounded, but rarely deep. The payloads of objects never
// stored then cost little (a few MB).
const Capacity = 1024

// payloads holds the remembered payloads: entries by object, and ring, the
// objects in the order remembered, to forget the oldest when full. The
// mutex guards every field.
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
