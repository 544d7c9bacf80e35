package cache_test

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// corruptStoredRecord closes f, overwrites key's record with bytes no codec
// decodes, as a damaged page would leave it, and reopens f.
func corruptStoredRecord(t *testing.T, f *testFile, collection, key string) {
	t.Helper()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	corruptRecord(t, f.path, collection, key)
	f.open()
}

// panicOf returns what fn panicked with, or nil.
func panicOf(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// TestReadErrorIsNeverAbsence: with one stored record undecodable, no read
// hands out the other objects as if they were all there is. List panics
// with the read error (its signature has no error), ByIndex and GetByKey
// return the error and nothing else, and each failure is counted.
func TestReadErrorIsNeverAbsence(t *testing.T) {
	for _, bound := range []int{0, 1} {
		t.Run(fmt.Sprintf("cache=%d", bound), func(t *testing.T) {
			f := newTestFile(t)
			opts := bcache.IndexerOptions{
				Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				CacheObjects: bound,
			}
			i := f.indexer(opts)
			for _, name := range []string{"a", "b", "c"} {
				if err := i.Add(pod("ns", name, "1", nil)); err != nil {
					t.Fatal(err)
				}
			}
			f.flush()
			corruptStoredRecord(t, f, "test", "ns/b")
			i = f.indexer(opts)

			v := panicOf(func() {
				got := i.List()
				t.Errorf("List returned %v with a record it cannot read; want a panic, never a partial list", names(got))
			})
			if err, ok := v.(error); !ok || !errors.Is(err, persist.ErrCorruptRecord) {
				t.Errorf("List panicked with %v; want an error wrapping persist.ErrCorruptRecord", v)
			}
			if objs, err := i.ByIndex(cache.NamespaceIndex, "ns"); err == nil || len(objs) != 0 {
				t.Errorf("ByIndex = %v, %v; want no objects and the read error", names(objs), err)
			}
			if _, exists, err := i.GetByKey("ns/b"); err == nil {
				t.Errorf("GetByKey(ns/b) = exists %v, no error; want the read error", exists)
			}
			if keys := i.ListKeys(); !eq(keys, []string{"ns/a", "ns/b", "ns/c"}) {
				t.Errorf("ListKeys = %v: keys need no decoding and must all be there", keys)
			}
			if n := bcache.ReadErrorsForTest(i); n < 6 { // List, ByIndex, GetByKey: each tried twice
				t.Errorf("counted %d read errors, want at least 6", n)
			}
		})
	}
}

// TestListAfterFileClosed checks a lister that outlives the cache file.
// With every object in memory, List keeps answering from memory. With a
// bounded cache it cannot answer. It panics instead of returning an empty
// list, which a controller would read as "everything was deleted".
func TestListAfterFileClosed(t *testing.T) {
	for _, bound := range []int{0, 1} {
		t.Run(fmt.Sprintf("cache=%d", bound), func(t *testing.T) {
			f := newTestFile(t)
			i := f.indexer(bcache.IndexerOptions{CacheObjects: bound})
			for _, name := range []string{"a", "b", "c"} {
				if err := i.Add(pod("ns", name, "1", nil)); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.db.Close(); err != nil {
				t.Fatal(err)
			}
			f.db = nil
			var got []interface{}
			v := panicOf(func() { got = i.List() })
			switch {
			case bound == 0 && (v != nil || len(got) != 3):
				t.Errorf("in-memory List after close = %v, panic %v; want all 3 objects", names(got), v)
			case bound > 0 && v == nil:
				t.Errorf("bounded List after close returned %v; want a panic", names(got))
			}
		})
	}
}
