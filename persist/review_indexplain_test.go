package persist_test

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// A plain value in the indexes bucket under the name of an index the
// collection does not record yet is damage too ("no plain value where any
// sub-bucket belongs"). checkIndexBuckets looks only at the recorded
// indexes, so the open goes on, and building the new index there
// (buildIndexes' DeleteBucket, then CreateBucket) fails with bbolt's
// incompatible value: every open of the collection with that index fails,
// as undecodable index versions did before eb04aa7, until a person
// deletes the file. AddIndexes fails the same way.
func TestPlainValueForANewIndexIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	writeDamageFixture(t, path)
	updateFile(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.IndexesBucket).Put([]byte("name2"), []byte("not a bucket"))
	})
	db := openDB(t, path, persist.Options{})

	withNew := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1", "name2": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
	if c, err := openNoPanic(db, "cms", withNew); err != nil {
		t.Errorf("open with a new index: %v", err)
	} else if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	c, err := openNoPanic(db, "cms", persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}})
	if err != nil {
		t.Fatalf("open with the recorded index: %v", err)
	}
	if err := c.AddIndexes(context.Background(), map[string]string{"name2": "1"}, byName); err != nil {
		t.Errorf("AddIndexes: %v", err)
	}
}
