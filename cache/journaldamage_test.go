package cache_test

import (
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/internal/poll"
)

// corruptJournal overwrites the first entry of the collection's journal
// with bytes that are no journal entry.
func corruptJournal(t *testing.T, path, collection string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte(collection)).Bucket(format.JournalBucket)
		if jb == nil {
			t.Fatal("the collection has no journal")
		}
		gen, _ := jb.Cursor().First()
		gb := jb.Bucket(gen)
		seq, _ := gb.Cursor().First()
		return gb.Put(seq, []byte{0xff, 0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
}

// A journal entry that cannot be read does not make the collection
// impossible to open (an informer constructor failing on every restart
// until a person deletes the file): the journal is set aside, the
// collection keeps what its trees hold, and the informer lists before it
// is synced — reported and counted as a read error.
func TestWarmStartCorruptJournalRelists(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil) // the list: into the trees
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	src.Delete(pod("ns", "c", "", nil))
	poll.Until(t, 10*time.Second, "watch events", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	r.stop()
	if err := f.db.Close(); err != nil { // the events: into the journal
		t.Fatal(err)
	}
	corruptJournal(t, f.path, "pods")
	f.open()

	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with %v, want the source's %v", got, want)
	}
	select {
	case err := <-r.errs:
		if !strings.Contains(err.Error(), "journal") {
			t.Errorf("reported %v, want the journal's damage", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the journal's damage was not reported")
	}
	if starts := r.starts(t); len(starts) == 0 || starts[0] == "resumed" {
		t.Errorf("reflector starts %v: the informer resumed instead of listing", starts)
	}
	// The next start finds a sound collection: the list cleared the mark.
	r.stop()
	f.reopen()
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("after another restart %v, want %v", got, want)
	}
}
