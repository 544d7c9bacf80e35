package format

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestCheckIndexValuesGenerated draws index values, encodes them as every
// writer does (msgpack of a []string), and damages the encoding. An
// encoding must pass CheckIndexValues and decode to the values. A damaged
// one that passes must decode too: a commit decodes every byKey value it
// replaces, and one that failed would fail every commit of the file. The
// seed is logged, so a failure can be replayed.
func TestCheckIndexValuesGenerated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for n := 0; n < 5000; n++ {
		values := drawIndexValues(r)
		raw, err := msgpack.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckIndexValues(raw); err != nil {
			t.Fatalf("the encoding of %q: %v", values, err)
		}
		got, err := DecodeIndexValues(raw)
		if err != nil || !slices.Equal(got, values) {
			t.Fatalf("the encoding of %q decoded to %q, %v", values, got, err)
		}
		damaged := damageBytes(r, raw)
		err = CheckIndexValues(damaged)
		if err != nil && !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("CheckIndexValues(%q) = %v; want an error wrapping ErrCorruptRecord", damaged, err)
		}
		if _, derr := DecodeIndexValues(damaged); err == nil && derr != nil {
			t.Fatalf("CheckIndexValues passed %q (from %q), which does not decode: %v", damaged, values, derr)
		}
	}
}

// drawIndexValues draws up to 40 values of lengths around every msgpack
// string form's bounds.
func drawIndexValues(r *rand.Rand) []string {
	lengths := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	values := make([]string, r.IntN(41))
	for i := range values {
		n := r.IntN(40)
		if r.IntN(8) == 0 {
			n = max(0, lengths[r.IntN(len(lengths))]+r.IntN(3)-1)
		}
		values[i] = strings.Repeat(string(rune('a'+r.IntN(26))), n)
	}
	return values
}

// damageBytes returns a copy of raw with a byte changed, a stretch cut off
// or bytes appended.
func damageBytes(r *rand.Rand, raw []byte) []byte {
	out := slices.Clone(raw)
	switch r.IntN(4) {
	case 0:
		if len(out) > 0 {
			out[r.IntN(len(out))] = byte(r.IntN(256))
		}
	case 1:
		if len(out) > 0 {
			out[r.IntN(min(len(out), 8))] = byte(r.IntN(256)) // a header
		}
	case 2:
		out = out[:r.IntN(len(out)+1)]
	case 3:
		for range 1 + r.IntN(4) {
			out = append(out, byte(r.IntN(256)))
		}
	}
	return out
}
