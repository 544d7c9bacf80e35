package persist

import (
	"fmt"
	"testing"
)

// A burst of changes, such as the catch-up of a warm restart or a
// rollout, fills group commits up to Options.BatchLimit. Each committed
// layer's record buffers must go back to the pool for the next commit's
// records, or a burst allocates most of its records anew. This test
// recycles layers of several sizes and counts the buffers given back (a
// record given back leaves its change): all of them up to
// DefaultBatchLimit, and no more than that from a larger layer (a list
// committed whole), whose buffers would stay pinned beside its objects.
// It counts the layer's side, not the pool's: a sync.Pool may drop what it
// is given, at a collection or at random under the race detector.
func TestRecycleRecordsKeepsABatchOfBuffers(t *testing.T) {
	for _, n := range []int{1, 1000, 1025, 3000, DefaultBatchLimit, 3 * DefaultBatchLimit} {
		l := newLayer()
		for k := range n {
			l.changes[fmt.Sprint(k)] = &change{record: make([]byte, 100, 4096)}
		}
		l.recycleRecords()
		got := 0
		for _, ch := range l.changes {
			if ch.record == nil {
				got++
			}
		}
		if want := min(n, DefaultBatchLimit); got != want {
			t.Errorf("a committed layer of %d records gave back %d buffers, want %d", n, got, want)
		}
	}
}
