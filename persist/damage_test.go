package persist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// writeDamageFixture writes a collection with every sub-bucket a
// collection may have, and a description. Objects are in the trees, a
// change in the journal, and a checkpoint holds an acknowledgement, a
// tombstone and a stamp.
func writeDamageFixture(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, path, persist.WithMinJournalBytes(persist.Options{}, 1<<30))
	opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}, Description: fixtureDescription}
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "1", cm("a", "1"), cm("b", "1"), cm("c", "1"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/b", "1")
	putNamed(t, c, "2", cm("a", "2")) // journaled
	if err := c.Apply([]persist.Op{{Key: "ns/b", Delete: true, DeletedAt: "3"}}, "3"); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Every bucket the test damages is there to damage.
	updateFile(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		for _, name := range [][]byte{format.CollMetaBucket, format.ObjectsBucket, format.IndexesBucket, format.VersionsBucket, format.JournalBucket, format.CheckpointsBucket, format.TombstonesBucket, format.CheckpointSeenBucket} {
			if b.Bucket(name) == nil {
				return fmt.Errorf("the fixture lacks its %q bucket", name)
			}
		}
		return nil
	})
}

// fixtureDescription is the description the damage fixtures are written
// with.
var fixtureDescription = map[string]string{"resource": "configmaps"}

// A collection whose structure is damaged opens without a panic. A
// sub-bucket it needs may be missing or hold a plain value, or its
// metadata may not decode. A writer empties such a collection at open and
// says why (DamageSetAside). The collection then starts cold: it has no
// resourceVersion, so its owner lists. Commits of it succeed, and so do
// those of the file's other collections. A read-only open fails with
// ErrCorruptRecord instead. A sub-bucket the collection can do without is
// not damage. Checkpoints, tombstones and their stamps are optional, as is
// the versions bucket, which is rebuilt.
func TestDamagedCollectionOpensCold(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.db")
	writeDamageFixture(t, fixture)
	sub := func(path ...string) func(*bolt.Bucket) *bolt.Bucket {
		return func(b *bolt.Bucket) *bolt.Bucket {
			for _, p := range path[:len(path)-1] {
				b = b.Bucket([]byte(p))
			}
			return b
		}
	}
	remove := func(path ...string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			return sub(path...)(tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))).DeleteBucket([]byte(path[len(path)-1]))
		}
	}
	// replace puts a plain value where the bucket at path was.
	replace := func(path ...string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if err := remove(path...)(tx); err != nil {
				return err
			}
			return sub(path...)(tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))).Put([]byte(path[len(path)-1]), []byte("not a bucket"))
		}
	}
	putMeta := func(key, value string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			return tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CollMetaBucket).Put([]byte(key), []byte(value))
		}
	}
	cases := []struct {
		name    string
		damage  func(*bolt.Tx) error
		damaged bool // else the collection keeps its objects
	}{
		{"meta missing", remove("meta"), true},
		{"objects missing", remove("objects"), true},
		{"indexes missing", remove("indexes"), true},
		{"an index missing", remove("indexes", "name"), true},
		{"an index's byValue missing", remove("indexes", "name", "byValue"), true},
		{"an index's byKey missing", remove("indexes", "name", "byKey"), true},
		{"meta not a bucket", replace("meta"), true},
		{"objects not a bucket", replace("objects"), true},
		{"indexes not a bucket", replace("indexes"), true},
		{"journal not a bucket", replace("journal"), true},
		{"versions not a bucket", replace("versions"), true},
		{"checkpoints not a bucket", replace("checkpoints"), true},
		{"tombstones not a bucket", replace("tombstones"), true},
		{"checkpointSeen not a bucket", replace("checkpointSeen"), true},
		{"an index's byValue not a bucket", replace("indexes", "name", "byValue"), true},
		{"index versions undecodable", putMeta("indexes", "\xc1"), true},
		{"provenance undecodable", putMeta("provenance", "\xc1"), true},
		{"the collection not a bucket", func(tx *bolt.Tx) error {
			root := tx.Bucket(format.CollectionsBucket)
			if err := root.DeleteBucket([]byte("cms")); err != nil {
				return err
			}
			return root.Put([]byte("cms"), []byte("not a bucket"))
		}, true},
		{"versions missing", remove("versions"), false},
		{"checkpoints missing", remove("checkpoints"), false},
		{"tombstones missing", remove("tombstones"), false},
		{"checkpointSeen missing", remove("checkpointSeen"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			copyFile(t, fixture, path)
			updateFile(t, path, tc.damage)
			opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}

			ro := openDB(t, path, persist.Options{ReadOnly: true})
			_, err := openNoPanic(ro, "cms", opts)
			if tc.damaged && !errors.Is(err, persist.ErrCorruptRecord) {
				t.Errorf("read-only open = %v, want ErrCorruptRecord", err)
			} else if !tc.damaged && err != nil {
				t.Errorf("read-only open: %v", err)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}

			db := openDB(t, path, persist.Options{})
			other, err := db.Collection("other", persist.CollectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := openNoPanic(db, "cms", opts)
			if err != nil {
				t.Fatalf("open for writing: %v", err)
			}
			keys, err := c.Keys()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys)
			if tc.damaged {
				if err := c.DamageSetAside(); !errors.Is(err, persist.ErrCorruptRecord) {
					t.Errorf("DamageSetAside() = %v, want ErrCorruptRecord", err)
				}
				if len(keys) != 0 || c.ResourceVersion() != "" {
					t.Errorf("the damaged collection holds %v at resourceVersion %q, want it empty", keys, c.ResourceVersion())
				}
			} else {
				if err := c.DamageSetAside(); err != nil {
					t.Errorf("DamageSetAside() = %v, want nil", err)
				}
				if !slices.Equal(keys, []string{"ns/a", "ns/c"}) || c.ResourceVersion() != "3" {
					t.Errorf("the collection holds %v at resourceVersion %q, want [ns/a ns/c] at 3", keys, c.ResourceVersion())
				}
			}
			putNamed(t, c, "4", cm("a", "4"), cm("d", "4"))
			put(t, other, "9", cm("x", "9"))
			if err := db.Flush(context.Background()); err != nil {
				t.Fatalf("commit after the open: %v", err)
			}
			if got, err := c.IndexKeys("name", "d"); err != nil || !slices.Equal(got, []string{"ns/d"}) {
				t.Errorf("IndexKeys(d) = %v, %v", got, err)
			}
			cp, err := c.Checkpoint("handler")
			if err != nil {
				t.Fatal(err)
			}
			ack(t, cp, "ns/d", "4")
			cp.Close()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			// The file is whole again: a reopen, for reading too, keeps it.
			for _, readOnly := range []bool{false, true} {
				db := openDB(t, path, persist.Options{ReadOnly: readOnly})
				c, err := openNoPanic(db, "cms", opts)
				if err != nil {
					t.Fatalf("reopen (read-only %t): %v", readOnly, err)
				}
				if err := c.DamageSetAside(); err != nil {
					t.Errorf("reopen (read-only %t): DamageSetAside() = %v", readOnly, err)
				}
				if rv, err := c.CommittedResourceVersion(); err != nil || rv != "4" {
					t.Errorf("reopen (read-only %t): committed resourceVersion %q, %v; want 4", readOnly, rv, err)
				}
				if _, err := db.Collections(); err != nil {
					t.Errorf("reopen (read-only %t): Collections: %v", readOnly, err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// openNoPanic is DB.Collection, with a panic returned as an error.
func openNoPanic(db *persist.DB, name string, opts persist.CollectionOptions) (c *persist.Collection, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("DB.Collection panicked: %v", r)
		}
	}()
	return db.Collection(name, opts)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// A file whose collections bucket is missing is corrupt: Open fails with
// ErrCorrupt, and MoveAsideCorrupt starts over with an empty file. Every
// collection would otherwise find no bucket to open.
func TestFileWithoutCollectionsIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	writeDamageFixture(t, path)
	updateFile(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(format.CollectionsBucket) })
	for _, readOnly := range []bool{false, true} {
		if db, err := persist.Open(path, persist.Options{ReadOnly: readOnly}); !errors.Is(err, persist.ErrCorrupt) {
			if db != nil {
				db.Close()
			}
			t.Errorf("Open (read-only %t) = %v, want ErrCorrupt", readOnly, err)
		}
	}
	db := openDB(t, path, persist.Options{MoveAsideCorrupt: true})
	if db.MovedAside() == "" {
		t.Error("MoveAsideCorrupt did not move the file aside")
	}
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "1", cm("a", "1"))
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Index entries and versions are derived from the records, so a writable
// open rebuilds them when one is damaged, and the collection resumes with
// nothing set aside. A byValue entry that names no object failed every
// read of its index (IndexValues, and List once it loaded the indexes into
// memory): no set-aside of an object removes it. A byKey value that does
// not decode failed every commit that changed its key, and with it every
// commit and Close of the file.
func TestDamagedIndexEntriesAreRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b *bolt.Bucket) error
	}{
		{"byValue entry naming no object", func(b *bolt.Bucket) error {
			return b.Bucket(format.IndexesBucket).Bucket([]byte("name")).Bucket(format.ByValueBucket).Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
		}},
		{"byKey value not a list", func(b *bolt.Bucket) error {
			return b.Bucket(format.IndexesBucket).Bucket([]byte("name")).Bucket(format.ByKeyBucket).Put([]byte("ns/c"), []byte{0xc1, 0xc1})
		}},
		{"version not one", func(b *bolt.Bucket) error {
			return b.Bucket(format.VersionsBucket).Put([]byte("ns/c"), []byte{0xff, 0xff, 0xff})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			writeDamageFixture(t, path)
			updateFile(t, path, func(tx *bolt.Tx) error {
				return tc.damage(tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")))
			})
			db := openDB(t, path, persist.Options{JournalShare: -1}) // commits write the trees
			opts := persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
			c, err := openNoPanic(db, "cms", opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.ResourceVersion() != "3" || c.MustList() {
				t.Errorf("the collection opens at resourceVersion %q, must-list %t; want 3, false", c.ResourceVersion(), c.MustList())
			}
			if err := c.RebuiltAtOpen(); !errors.Is(err, persist.ErrCorruptRecord) {
				t.Errorf("RebuiltAtOpen() = %v, want the damage found", err)
			}
			values, err := c.IndexValues("name")
			if err != nil || !slices.Equal(values, []string{"a", "c"}) {
				t.Errorf("IndexValues(name) = %v, %v; want [a c]", values, err)
			}
			if objs, err := c.List(); err != nil || len(objs) != 2 {
				t.Errorf("List() = %d objects, %v; want 2", len(objs), err)
			}
			if v, err := c.Versions(); err != nil || v["ns/c"].ResourceVersion != "1" {
				t.Errorf("Versions() = %v, %v; want ns/c at 1", v, err)
			}
			putNamed(t, c, "4", cm("c", "4"))
			if err := db.Flush(context.Background()); err != nil {
				t.Fatalf("commit of the damaged key: %v", err)
			}
			if keys, err := c.IndexKeys("name", "c"); err != nil || !slices.Equal(keys, []string{"ns/c"}) {
				t.Errorf("IndexKeys(name, c) = %v, %v; want [ns/c]", keys, err)
			}
		})
	}
}

// An index is built from the records: at open when its version changed,
// and by AddIndexes. A record that does not decode cannot be indexed.
// At open, the build sets such a record aside, with the must-list mark, in
// its transaction, and indexes the rest. Otherwise every later open would
// fail on it. AddIndexes instead fails, naming the record, and changes
// nothing: its caller may have no list to fetch the record again with. The
// caller sets the record aside (SetAside), and AddIndexes then succeeds.
func TestIndexBuildSetsAsideUnreadableRecords(t *testing.T) {
	for _, add := range []bool{false, true} {
		t.Run(fmt.Sprintf("AddIndexes=%t", add), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			writeDamageFixture(t, path)
			updateFile(t, path, func(tx *bolt.Tx) error {
				objects := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.ObjectsBucket)
				rec := bytes.Clone(objects.Get([]byte("ns/c")))
				return objects.Put([]byte("ns/c"), rec[:len(rec)-4])
			})
			db := openDB(t, path, persist.Options{})
			opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "2"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
			if add {
				opts.Indexes = map[string]string{"name": "1"}
			}
			c, err := openNoPanic(db, "cms", opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if add {
				err := c.AddIndexes(context.Background(), map[string]string{"other": "1"}, byName)
				var unreadable *persist.UnreadableRecordsError
				if !errors.As(err, &unreadable) || !slices.Equal(unreadable.Keys, []string{"ns/c"}) || !errors.Is(err, persist.ErrCorruptRecord) {
					t.Fatalf("AddIndexes = %v; want an UnreadableRecordsError naming ns/c", err)
				}
				keys, err := c.Keys()
				if err != nil || !slices.Equal(keys, []string{"ns/a", "ns/c"}) || c.MustList() || c.RecordsSetAside() != nil {
					t.Fatalf("after the failed AddIndexes the collection holds %v (%v), must-list %t, set aside %v; want it unchanged", keys, err, c.MustList(), c.RecordsSetAside())
				}
				if got := c.Indexes(); !maps.Equal(got, map[string]string{"name": "1"}) {
					t.Fatalf("after the failed AddIndexes the indexes are %v; want only name", got)
				}
				if err := c.SetAside([]persist.Op{{Key: "ns/c", Delete: true}}); err != nil {
					t.Fatal(err)
				}
				if err := c.AddIndexes(context.Background(), map[string]string{"other": "1"}, byName); err != nil {
					t.Fatalf("AddIndexes after the set-aside: %v", err)
				}
			} else if err := c.RecordsSetAside(); !errors.Is(err, persist.ErrCorruptRecord) {
				t.Errorf("RecordsSetAside() = %v, want the record that did not decode", err)
			}
			keys, err := c.Keys()
			if err != nil || !slices.Equal(keys, []string{"ns/a"}) || !c.MustList() || c.ResourceVersion() != "3" {
				t.Errorf("the collection holds %v (%v), must-list %t, at resourceVersion %q; want [ns/a], must-list, at 3", keys, err, c.MustList(), c.ResourceVersion())
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openDB(t, path, persist.Options{})
			if c, err = db.Collection("cms", opts); err != nil {
				t.Fatalf("reopen: %v", err)
			}
			if !c.MustList() {
				t.Error("the must-list mark was not kept")
			}
		})
	}
}

// The meta values only DB.Collections reads, the time of the last commit
// and the description, may not decode. A writable open repairs them even
// when it commits nothing, so that the owner's clean close leaves a file
// inspect describes again. The commit time that does not decode is
// dropped (Committed is then zero); a description that does not decode is
// dropped, or replaced by the one the open gives.
func TestUndecodableInfoIsRepairedAtOpen(t *testing.T) {
	garbage := []byte{0xc1, 0xff, 'x'}
	pods := map[string]string{"resource": "pods"}
	for _, tc := range []struct {
		name  string
		key   []byte
		given map[string]string // the open's description
		want  map[string]string // the description after it
	}{
		{"commit time", format.CommittedKey, nil, fixtureDescription},
		{"description, none given", format.DescriptionKey, nil, nil},
		{"description, one given", format.DescriptionKey, pods, pods},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			writeDamageFixture(t, path)
			updateFile(t, path, func(tx *bolt.Tx) error {
				meta := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CollMetaBucket)
				return meta.Put(tc.key, garbage)
			})
			opts := damageOpts
			opts.Description = tc.given
			db := openDB(t, path, persist.Options{NoSync: true})
			c, err := db.Collection("cms", opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.DamageSetAside(); err != nil {
				t.Errorf("DamageSetAside = %v: the collection was emptied for a value it does not need", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			ro := openDB(t, path, persist.Options{ReadOnly: true})
			infos, err := ro.Collections()
			if err != nil {
				t.Fatalf("after a writable open and a clean close without a commit, Collections: %v", err)
			}
			if len(infos) != 1 || infos[0].Objects != 2 || !maps.Equal(infos[0].Description, tc.want) {
				t.Errorf("Collections = %+v, want cms with 2 objects, description %v", infos, tc.want)
			}
		})
	}
}
