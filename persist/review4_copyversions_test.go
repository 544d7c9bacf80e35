package persist_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// The versions are derived from the records, and every writable open
// reads every one of them and rebuilds a damaged one (docs/persist.md).
// While a fold runs, part of the versions lives in the fold's copy
// (rebuild/versions). Damage there must be found and rebuilt by the
// writable open as damage in the versions tree is: RebuiltAtOpen says
// so, and Versions serves every key.
func TestWritableOpenChecksTheFoldsCopyOfTheVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	m := foldInProgress(t, path, dbOpts, opts)

	// Garble every version the copy holds.
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	if err := bdb.Update(func(tx *bolt.Tx) error {
		rv := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.RebuildBucket).Bucket(format.VersionsBucket)
		var keys [][]byte
		_ = rv.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
		for _, k := range keys {
			if err := rv.Put(k, []byte{0xc1, 0xc1, 0xc1}); err != nil {
				return err
			}
			damaged++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()
	if damaged == 0 {
		t.Fatal("the fold's copy of the versions holds nothing to damage")
	}

	db := openDB(t, path, dbOpts)
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.RebuiltAtOpen() == nil {
		t.Errorf("RebuiltAtOpen() = nil after %d versions in the fold's copy were damaged; want them found and rebuilt", damaged)
	}
	versions, err := c.Versions()
	if err != nil {
		t.Fatalf("Versions after a writable open: %v", err)
	}
	if len(versions) != len(m) {
		t.Fatalf("Versions has %d keys, want %d", len(versions), len(m))
	}
	checkJournalModel(t, "after the writable open", c, m)
}
