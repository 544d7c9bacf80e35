package persist_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// Commits record, under meta's "journal" key, each journal generation and
// its last sequence number. An open sets aside a journal that lacks part
// of what the record names. Older builds of schema 3 still open and write
// the file, as when a rollout is rolled back and forward again. Such a
// build appends to the journal and leaves the record as it was. The
// journal then holds every entry the record names and more. Nothing is
// lost, so the open must take the journal as found: no set-aside, no
// must-list mark, and c's creation at 3 still served.
func TestAJournalLongerThanItsRecordIsNotSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithMinJournalBytes(persist.Options{}, 1<<30) // nothing folds
	opts := persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
	ctx := context.Background()

	db := openDB(t, path, dbOpts)
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "1", cm("a", "1"), cm("b", "1"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "2", cm("a", "2")) // journaled
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var record []byte
	updateFile(t, path, func(tx *bolt.Tx) error {
		record = bytes.Clone(tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CollMetaBucket).Get(format.JournalKey))
		return nil
	})
	if record == nil {
		t.Fatal("no journal record")
	}

	// The older build's commit: one more journal entry, and the record it
	// does not know left as it was.
	db = openDB(t, path, dbOpts)
	if c, err = db.Collection("cms", opts); err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "3", cm("c", "3"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	updateFile(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CollMetaBucket).Put(format.JournalKey, record)
	})

	db = openDB(t, path, dbOpts)
	if c, err = db.Collection("cms", opts); err != nil {
		t.Fatal(err)
	}
	if err := c.JournalSetAside(); err != nil {
		t.Errorf("a journal holding every entry its record names, and one more, was set aside: %v", err)
	}
	obj, ok, err := c.Get("ns/c")
	if err != nil || !ok || obj.(*corev1.ConfigMap).ResourceVersion != "3" || c.MustList() {
		t.Errorf("ns/c = %v, %v, %v; must-list %v: want c at 3, committed to the journal, and no list owed", ok, err, obj, c.MustList())
	}
}
