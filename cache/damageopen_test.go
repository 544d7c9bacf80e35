package cache_test

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/recovery"
)

// A damaged index entry is rebuilt from the records when the informer's
// constructor opens the collection. A record that does not decode is then
// set aside with the must-list mark (persist: RecordsSetAside). The
// informer owes a list: it is synced only once the store holds what the
// server holds, changes made while it was down included.
func TestIndexRebuildSetAsideListsBeforeSynced(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	indexers := cache.Indexers{"v": byLabel("v")}
	populate(t, f, src, bcache.Persistence{}, indexers, nil)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, f.path, "pods", "ns/b")
	bdb, err := bolt.Open(f.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(format.CollectionsBucket).Bucket([]byte("pods")).Bucket(format.IndexesBucket).Bucket([]byte("v")).Bucket(format.ByValueBucket).Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	// While the program is down.
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	src.Delete(pod("ns", "c", "", nil))
	src.Add(pod("ns", "d", "", nil))
	f.open()

	lister := &sourceLister{src: src}
	r := startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{
		Indexers: indexers, Persistence: bcache.Persistence{CacheObjects: 2},
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with %v, want the source's %v", got, want)
	}
	if err := r.inf.Indexer().Collection().RecordsSetAside(); err == nil {
		t.Fatal("no record was set aside: the test damaged nothing the open found")
	}
	r.stop()
	for {
		select {
		case err := <-r.errs:
			if strings.Contains(err.Error(), "building an index") {
				return
			}
			continue
		default:
			t.Error("the records set aside at open were not reported to the watch error handler")
		}
		return
	}
}
