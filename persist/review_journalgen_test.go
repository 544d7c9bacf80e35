package persist_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// A plain value where a journal generation's bucket belongs is damage of
// the same kind TestDamagedCollectionOpensCold covers one level up ("a
// plain value where the journal ... bucket belongs, failed every commit
// of the file for ever"; the structure check promises "no plain value
// where any sub-bucket belongs"). It is not caught: WalkJournal's
// ForEachBucket skips the value, so the collection opens with no journal
// and no damage reported, resuming at the resourceVersion the lost
// generation was committed with (3) while its trees hold the state of 1
// (ns/b, deleted at 3, is served again). The next commit then creates
// generation 1 where the plain value stands, fails, and so does every
// commit of the file after it, the other collection's too.
func TestPlainValueForAJournalGenerationIsDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	writeDamageFixture(t, path)
	updateFile(t, path, func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.JournalBucket)
		var gens [][]byte
		if err := jb.ForEachBucket(func(k []byte) error { gens = append(gens, slices.Clone(k)); return nil }); err != nil {
			return err
		}
		if len(gens) != 1 {
			t.Fatalf("the fixture's journal has %d generations, want 1", len(gens))
		}
		if err := jb.DeleteBucket(gens[0]); err != nil {
			return err
		}
		return jb.Put(gens[0], []byte("not a bucket"))
	})

	opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
	db := openDB(t, path, persist.Options{})
	other, err := db.Collection("other", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := openNoPanic(db, "cms", opts)
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	damaged := c.DamageSetAside() != nil || c.JournalSetAside() != nil
	keys, err := c.Keys()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !damaged && c.ResourceVersion() != "" && !c.MustList() {
		t.Errorf("the damage went unnoticed: the collection resumes at resourceVersion %q holding %v (the lost journal deleted ns/b at 3)", c.ResourceVersion(), keys)
	}

	putNamed(t, c, "4", cm("a", "4"), cm("d", "4"))
	put(t, other, "9", cm("x", "9"))
	if err := db.Flush(context.Background()); err != nil {
		t.Errorf("commit after the open: %v", err)
	}
	put(t, other, "10", cm("y", "10"))
	if err := db.Flush(context.Background()); err != nil {
		t.Errorf("a later commit of the other collection: %v", err)
	}
	if rv, err := other.CommittedResourceVersion(); err != nil || rv != "10" {
		t.Errorf("the other collection committed resourceVersion %q, %v; want 10", rv, err)
	}
}
