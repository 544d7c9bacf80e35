package persist_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
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
