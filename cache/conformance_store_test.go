package cache_test

import (
	"fmt"
	"sync"
	"testing"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// TestConformanceConcurrentStoreReads reads a reopened store from several
// goroutines at once, as listers do while the informer reconciles a relist
// (ListKeys) — client-go's store allows any number of concurrent readers.
// Run it with -race: the first full walk of a reopened collection records
// that its object cache is complete, and every reader must be able to do
// that concurrently.
func TestConformanceConcurrentStoreReads(t *testing.T) {
	f := newTestFile(t)
	idx := f.indexer(bcache.IndexerOptions{})
	for i := 0; i < 50; i++ {
		if err := idx.Add(pod("ns", fmt.Sprintf("p%02d", i), fmt.Sprint(i+1), nil)); err != nil {
			t.Fatal(err)
		}
	}
	f.flush()
	f.reopen()
	idx = f.indexer(bcache.IndexerOptions{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				if n := len(idx.List()); n != 50 {
					t.Errorf("List returned %d objects, want 50", n)
					return
				}
				if n := len(idx.ListKeys()); n != 50 {
					t.Errorf("ListKeys returned %d keys, want 50", n)
					return
				}
			}
		})
	}
	wg.Wait()
}
