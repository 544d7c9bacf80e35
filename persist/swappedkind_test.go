package persist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// A journal generation emptied while a fold runs is set aside at open. The
// fold's copies are folded back, and the set-aside then brings every index
// tree in line with the records. Here index "old" of the folding fixture
// holds a bucket where the byKey values of ns/a belong. bbolt refuses to
// put a value over it, and the open used to fail with "incompatible value"
// at every attempt. The index is damaged, and damaged index entries are
// built again from the records at open. That holds whether the owner names
// the index or leaves it dormant.
func TestIndexEntryAsBucketBesideASetAsideJournal(t *testing.T) {
	fixture := filepath.Join(t.TempDir(), "fixture.db")
	writeFoldingFixture(t, fixture)
	want := readEverything(t, "the undamaged fixture", fixture, false)
	damage := func(t *testing.T, path string) {
		t.Helper()
		updateFile(t, path, func(tx *bolt.Tx) error {
			b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
			byKey := b.Bucket(format.IndexesBucket).Bucket([]byte("old")).Bucket(format.ByKeyBucket)
			if err := byKey.Delete([]byte("ns/a")); err != nil {
				return err
			}
			if _, err := byKey.CreateBucket([]byte("ns/a")); err != nil {
				return err
			}
			jb := b.Bucket(format.JournalBucket)
			if err := jb.DeleteBucket(format.JournalSeq(2)); err != nil {
				return err
			}
			_, err := jb.CreateBucket(format.JournalSeq(2))
			return err
		})
	}

	t.Run("dormant", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cache.db")
		copyFile(t, fixture, path)
		damage(t, path)
		opts := damageOpts
		opts.Indexes = map[string]string{"name": "1"}
		checkDamagedFile(t, path, opts, want, false)
	})

	t.Run("in use", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cache.db")
		copyFile(t, fixture, path)
		damage(t, path)
		opts := damageOpts
		opts.Indexes = map[string]string{"name": "1", "old": "1"}
		for open := 1; open <= 2; open++ {
			db, err := openDBNoPanic(path, persist.Options{NoSync: true, Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			c, err := openNoPanic(db, "cms", opts)
			if err != nil {
				db.Close()
				t.Fatalf("open %d of the collection for writing: %v", open, err)
			}
			rebuilt, journal := c.RebuiltAtOpen(), c.JournalSetAside()
			switch {
			case open == 1 && (journal == nil || rebuilt == nil || !strings.Contains(rebuilt.Error(), `index "old"`)):
				t.Errorf("open 1: JournalSetAside() = %v, RebuiltAtOpen() = %v; want the journal set aside and index \"old\" built again", journal, rebuilt)
			case open == 2 && rebuilt != nil:
				t.Errorf("open 2: RebuiltAtOpen() = %v, want nil: the first open left the index whole", rebuilt)
			}
			// Every stored object is found under its name in "old", and
			// nothing else is.
			keys, err := c.Keys()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, key := range keys {
				name := strings.TrimPrefix(key, "ns/")
				names = append(names, name)
				if got, err := c.IndexKeys("old", name); err != nil || !slices.Equal(got, []string{key}) {
					t.Errorf("open %d: IndexKeys(old, %q) = %v, %v; want [%s]", open, name, got, err, key)
				}
			}
			slices.Sort(names)
			if got, err := c.IndexValues("old"); err != nil || !slices.Equal(got, names) {
				t.Errorf("open %d: IndexValues(old) = %v, %v; want %v, the names of the records %v", open, got, err, names, keys)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// writeCheckpointFixture writes a collection whose checkpoint "handler"
// acknowledges ns/a and ns/b, which the trees hold, and ns/aa, which only
// the journal holds, since a commit of keys after the stored ones writes
// the trees. It holds a tombstone of ns/c, deleted once
// acknowledged.
func writeCheckpointFixture(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, path, persist.WithJournalBytes(persist.Options{NoSync: true}, 1<<30))
	c, err := db.Collection("cms", damageOpts)
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	putNamed(t, c, "1", cm("a", "1"), cm("b", "1"), cm("c", "1"))
	flush()
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/a", "1")
	ack(t, cp, "ns/b", "1")
	ack(t, cp, "ns/c", "1")
	putNamed(t, c, "2", cm("aa", "2"))
	flush()
	ack(t, cp, "ns/aa", "2")
	if err := c.Apply([]persist.Op{{Key: "ns/c", Delete: true, DeletedAt: "3"}}, "3"); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	acks, tombstones := checkpointEntries(t, path)
	if !slices.Equal(acks, []string{"ns/a", "ns/aa", "ns/b"}) || !slices.Equal(tombstones, []string{"ns/c"}) {
		t.Fatalf("the fixture's checkpoint acknowledges %v and holds tombstones of %v; want [ns/a ns/aa ns/b] and [ns/c]", acks, tombstones)
	}
}

// checkpointEntries returns the keys of the acknowledgements and of the
// tombstones of checkpoint "handler" in the file at path, buckets or not.
func checkpointEntries(t *testing.T, path string) (acks, tombstones []string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		for _, e := range []struct {
			parent []byte
			keys   *[]string
		}{{format.CheckpointsBucket, &acks}, {format.TombstonesBucket, &tombstones}} {
			pb := b.Bucket(e.parent)
			if pb == nil || pb.Bucket([]byte("handler")) == nil {
				continue
			}
			if err := pb.Bucket([]byte("handler")).ForEach(func(k, _ []byte) error {
				*e.keys = append(*e.keys, string(k))
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return acks, tombstones
}

// A checkpoint's acknowledgements and tombstones are values, which commits
// put and delete. No open reads them all, which would cost a walk of every
// checkpoint. Damage may leave a bucket where one belongs, and bbolt
// refuses to put or delete a value there. A commit that failed on it would
// fail for every collection of the file, at every attempt.
//
// The test is a generator. Each acknowledgement and tombstone of a fixture
// is replaced by a bucket in turn, and each way a commit or an open writes
// that entry then runs. A bucket reads as an entry that does not decode: an
// acknowledgement of no version, or a deletion whose last state is lost.
// Every commit must succeed, and the entry must then be what the write made
// it, as if it had been whole: a deletion of an acknowledged key is told,
// and one acknowledged is not told again.
func TestCheckpointEntryAsBucket(t *testing.T) {
	ctx := context.Background()
	fixture := filepath.Join(t.TempDir(), "fixture.db")
	writeCheckpointFixture(t, fixture)
	// A write is what runs against the damaged entry of key. It returns
	// what the checkpoint must then hold of key: its acknowledgement ("" if
	// none) and whether its deletion is still to be told.
	type write struct {
		name string
		run  func(t *testing.T, db *persist.DB, c *persist.Collection, cp *persist.Checkpoint, key string) (acked string, deleted bool)
	}
	apply := func(t *testing.T, c *persist.Collection, rv string, ops ...persist.Op) {
		t.Helper()
		if err := c.Apply(ops, rv); err != nil {
			t.Fatal(err)
		}
	}
	deletion := func(key, rv string) persist.Op { return persist.Op{Key: key, Delete: true, DeletedAt: rv} }
	ackWrites := []write{
		{"acknowledged", func(t *testing.T, _ *persist.DB, c *persist.Collection, cp *persist.Checkpoint, key string) (string, bool) {
			obj, _, err := c.Get(key)
			if err != nil {
				t.Fatal(err)
			}
			rv := obj.(*corev1.ConfigMap).ResourceVersion
			ack(t, cp, key, rv)
			return rv, false
		}},
		{"deleted", func(t *testing.T, _ *persist.DB, c *persist.Collection, _ *persist.Checkpoint, key string) (string, bool) {
			apply(t, c, "9", deletion(key, "9"))
			return "", true
		}},
		{"acknowledged and deleted", func(t *testing.T, _ *persist.DB, c *persist.Collection, cp *persist.Checkpoint, key string) (string, bool) {
			ack(t, cp, key, "8")
			apply(t, c, "9", deletion(key, "9"))
			return "", true
		}},
	}
	tombstoneWrites := []write{
		{"deletion acknowledged", func(t *testing.T, _ *persist.DB, _ *persist.Collection, cp *persist.Checkpoint, key string) (string, bool) {
			if err := cp.AckDeleted(key); err != nil {
				t.Fatal(err)
			}
			return "", false
		}},
		{"created and acknowledged", func(t *testing.T, _ *persist.DB, c *persist.Collection, cp *persist.Checkpoint, key string) (string, bool) {
			putNamed(t, c, "9", cm(strings.TrimPrefix(key, "ns/"), "9"))
			ack(t, cp, key, "9")
			return "9", false
		}},
		{"created, acknowledged and deleted", func(t *testing.T, db *persist.DB, c *persist.Collection, cp *persist.Checkpoint, key string) (string, bool) {
			putNamed(t, c, "9", cm(strings.TrimPrefix(key, "ns/"), "9"))
			if err := db.Flush(ctx); err != nil {
				t.Fatalf("commit of the creation: %v", err)
			}
			ack(t, cp, key, "9")
			apply(t, c, "10", deletion(key, "10"))
			return "", true
		}},
	}
	acks, tombstones := checkpointEntries(t, fixture)
	for _, site := range []struct {
		parent []byte
		keys   []string
		writes []write
	}{{format.CheckpointsBucket, acks, ackWrites}, {format.TombstonesBucket, tombstones, tombstoneWrites}} {
		for _, key := range site.keys {
			for _, w := range site.writes {
				t.Run(fmt.Sprintf("%s/%s/%s", site.parent, key, w.name), func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "cache.db")
					copyFile(t, fixture, path)
					entryAsBucket(t, path, site.parent, key)
					db := openDB(t, path, persist.Options{NoSync: true})
					c, err := openNoPanic(db, "cms", damageOpts)
					if err != nil {
						t.Fatalf("open for writing: %v", err)
					}
					cp, err := c.Checkpoint("handler")
					if err != nil {
						t.Fatal(err)
					}
					wantAck, wantDeleted := w.run(t, db, c, cp, key)
					cp.Close()
					if err := db.Flush(ctx); err != nil {
						t.Fatalf("commit: %v", err)
					}
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
					checkCheckpointAfter(t, path, key, wantAck, wantDeleted)
				})
			}
		}
	}

	// A journal set aside at open drops the changes only it held. The
	// acknowledgements of keys it drops become tombstones in the same
	// transaction, whole or not.
	for _, key := range acks {
		t.Run(fmt.Sprintf("%s/%s/journal set aside", format.CheckpointsBucket, key), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			copyFile(t, fixture, path)
			entryAsBucket(t, path, format.CheckpointsBucket, key)
			updateFile(t, path, func(tx *bolt.Tx) error {
				jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.JournalBucket)
				return jb.ForEachBucket(func(gen []byte) error {
					return jb.Bucket(gen).Delete(format.JournalSeq(1))
				})
			})
			db := openDB(t, path, persist.Options{NoSync: true})
			c, err := openNoPanic(db, "cms", damageOpts)
			if err != nil {
				t.Fatalf("open for writing: %v", err)
			}
			if c.JournalSetAside() == nil {
				t.Fatal("JournalSetAside() = nil: the test damaged no journal")
			}
			_, stored, err := c.Get(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if journalOnly := key == "ns/aa"; stored == journalOnly {
				t.Fatalf("after the journal's set-aside, %q is stored: %t; want %t", key, stored, !journalOnly)
			}
			if !stored {
				checkCheckpointAfter(t, path, key, "", true)
			}
		})
	}
}

// entryAsBucket replaces key's entry of checkpoint "handler" below parent
// (its acknowledgements or tombstones) in the file at path by a bucket.
func entryAsBucket(t *testing.T, path string, parent []byte, key string) {
	t.Helper()
	updateFile(t, path, func(tx *bolt.Tx) error {
		nb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(parent).Bucket([]byte("handler"))
		if err := nb.Delete([]byte(key)); err != nil {
			return err
		}
		_, err := nb.CreateBucket([]byte(key))
		return err
	})
}

// checkCheckpointAfter checks the file at path after a write of key's
// entry: every read succeeds, and checkpoint "handler" acknowledges key at
// wantAck ("" for none) and tells its deletion if wantDeleted. Neither
// entry is a bucket any more.
func checkCheckpointAfter(t *testing.T, path, key, wantAck string, wantDeleted bool) {
	t.Helper()
	for _, readOnly := range []bool{false, true} {
		what := fmt.Sprintf("reopen (read-only %t)", readOnly)
		if re := readEverything(t, what, path, readOnly); len(re.errs) > 0 {
			t.Errorf("%s: %v", what, re.errs)
		}
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		for _, parent := range [][]byte{format.CheckpointsBucket, format.TombstonesBucket} {
			if pb := b.Bucket(parent); pb != nil && pb.Bucket([]byte("handler")) != nil && pb.Bucket([]byte("handler")).Bucket([]byte(key)) != nil {
				t.Errorf("a bucket still stands where the %s entry of %q belongs", parent, key)
			}
		}
		return nil
	})
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, path, persist.Options{NoSync: true, ReadOnly: true})
	defer db.Close()
	c, err := db.Collection("cms", damageOpts)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	gotAck, _ := cp.Acked(key)
	_, gotDeleted := cp.Deleted()[key]
	if gotAck != wantAck || gotDeleted != wantDeleted {
		t.Errorf("checkpoint after the write: %q acknowledged at %q, deletion to tell %t; want %q, %t", key, gotAck, gotDeleted, wantAck, wantDeleted)
	}
}
