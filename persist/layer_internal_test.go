package persist

import (
	"fmt"
	"runtime/debug"
	"testing"
)

// A burst of changes, such as the catch-up of a warm restart or a
// rollout, fills group commits up to Options.BatchLimit. Each committed
// layer's record buffers must come back for the next commit's records, or
// a burst allocates most of its records anew. This test recycles layers of
// several sizes and counts the buffers the pool then hands out: all of
// them up to DefaultBatchLimit, and no more than that from a larger layer
// (a list committed whole), whose buffers would stay pinned beside its
// objects. The garbage collector, which empties the pool, is off meanwhile.
func TestRecycleRecordsKeepsABatchOfBuffers(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, n := range []int{1, 1000, 1025, 3000, DefaultBatchLimit, 3 * DefaultBatchLimit} {
		for recycledRecord() != nil { // empty the pool
		}
		l := newLayer()
		for k := range n {
			l.changes[fmt.Sprint(k)] = &change{record: make([]byte, 100, 4096)}
		}
		l.recycleRecords()
		got := 0
		for recycledRecord() != nil {
			got++
		}
		if want := min(n, DefaultBatchLimit); got != want {
			t.Errorf("a committed layer of %d records gave back %d buffers, want %d", n, got, want)
		}
	}
}
