package format

import (
	"bytes"
	"math/rand"
	"testing"
)

// A store recycles the buffers of committed records for the next records
// (persist's recordPool), whose sizes differ from object to object. A
// recycled buffer too small for the next record costs a fresh allocation.
// The buffers recycled must come to fit the records they meet, or a steady
// stream of updates allocates about every other record anew. This
// generator draws record sizes from several spreads and recycles each
// record's buffer into a random slot, as the pool does. Some records find
// the pool empty, as after a garbage collection clears it, and get a fresh
// buffer. After a warm-up, almost every record given a recycled buffer
// must be written over it.
func TestAppendRecordToRecycledBuffersFit(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		lo := 500 + rng.Intn(4000)
		spread := 1 + rng.Intn(lo) // sizes in [lo, lo+spread)
		slots := make([][]byte, 1+rng.Intn(64))
		h := Header{ResourceVersion: "1", Encoding: EncodingProtobuf, Type: "/v1, Kind=Pod"}
		const warmUp, measured = 2000, 2000
		fresh, recycled := 0, 0
		for i := range warmUp + measured {
			slot := rng.Intn(len(slots))
			buf := slots[slot]
			if rng.Intn(64) == 0 {
				buf = nil // the pool was empty
			}
			n := lo + rng.Intn(spread)
			rec, err := AppendRecordTo(buf, h, n, func(p []byte) error { clear(p); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if i >= warmUp && buf != nil {
				recycled++
				if &rec[:1][0] != &buf[:1][0] {
					fresh++
				}
			}
			got, payload, err := ReadHeader(rec)
			if err != nil || got != h || !bytes.Equal(payload, make([]byte, n)) {
				t.Fatalf("seed %d: record of a %d-byte payload reads as %+v with %d bytes, %v", seed, n, got, len(payload), err)
			}
			slots[slot] = rec[:0]
		}
		if fresh > recycled/40 {
			t.Errorf("seed %d: sizes %d..%d over %d recycled buffers: %d of %d records given a recycled buffer allocated anew after the warm-up, want at most %d", seed, lo, lo+spread-1, len(slots), fresh, recycled, recycled/40)
		}
	}
}
