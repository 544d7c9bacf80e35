package persist_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// TestDerivedDamageMidFoldIsRebuilt is a generator of damage to what a
// collection derives from its records, in files closed while a fold runs.
// Each fixture stops a seeded churn at a random point of a fold. Then every
// entry of the versions, of the fold's copy of them and of each index
// tree is damaged, one at a time, in two ways a check of it sees: a value
// that does not decode, and a bucket where the value belongs. A writable
// open must find each and build it again from the records
// (RebuiltAtOpen), and every read must then serve the model.
func TestDerivedDamageMidFoldIsRebuilt(t *testing.T) {
	seed := *damageSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("damage seed %d (rerun with -damage.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40, NoSync: true}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	fixtures := 3
	if testing.Short() {
		fixtures = 1
	}
	for f := range fixtures {
		fseed, copies := rng.Uint64(), 1+rng.IntN(12)
		t.Run(fmt.Sprintf("fixture%d", f), func(t *testing.T) {
			fixture := filepath.Join(t.TempDir(), "fixture.db")
			m := foldInProgressAt(t, fixture, dbOpts, opts, fseed, copies)
			sites := derivedSites(t, fixture)
			if !slices.ContainsFunc(sites, func(s [][]byte) bool { return bytes.Equal(s[0], format.RebuildBucket) }) {
				t.Fatalf("fixture (seed %d, %d copies) has no entry in the fold's copy of the versions", fseed, copies)
			}
			for _, site := range sites {
				for _, mut := range []string{"undecodable", "bucket"} {
					t.Run(fmt.Sprintf("%q/%s", bytes.Join(site, []byte("/")), mut), func(t *testing.T) {
						path := filepath.Join(t.TempDir(), "cache.db")
						copyFile(t, fixture, path)
						updateFile(t, path, func(tx *bolt.Tx) error {
							b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
							for _, p := range site[:len(site)-1] {
								b = b.Bucket(p)
							}
							k := site[len(site)-1]
							if mut == "bucket" {
								if err := b.Delete(k); err != nil {
									return err
								}
								_, err := b.CreateBucket(k)
								return err
							}
							return b.Put(k, []byte{0xc1, 0xc1, 0xc1})
						})
						db := openDB(t, path, dbOpts)
						c, err := db.Collection("cms", opts)
						if err != nil {
							t.Fatalf("writable open: %v", err)
						}
						if c.MustList() || c.JournalSetAside() != nil || c.DamageSetAside() != nil {
							t.Errorf("MustList %t, JournalSetAside %v, DamageSetAside %v; want nothing set aside for a derived entry", c.MustList(), c.JournalSetAside(), c.DamageSetAside())
						}
						checkJournalModel(t, "after the writable open", c, m)
						rebuilt := c.RebuiltAtOpen()
						if err := db.Close(); err != nil {
							t.Fatal(err)
						}
						// The open may finish the fold, whose update of the
						// index trees in place rewrites the damaged entry.
						if rebuilt == nil && stillDamaged(t, path, site) {
							t.Errorf("RebuiltAtOpen() = nil, and the damaged entry is still in the file; want it found and rebuilt")
						}
					})
				}
			}
		})
	}
}

// stillDamaged reports whether site, below the collection cms of the
// closed file at path, still holds a damage the test wrote.
func stillDamaged(t *testing.T, path string, site [][]byte) bool {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	damaged := false
	_ = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		for _, p := range site[:len(site)-1] {
			if b = b.Bucket(p); b == nil {
				return nil
			}
		}
		k := site[len(site)-1]
		damaged = b.Bucket(k) != nil || bytes.Equal(b.Get(k), []byte{0xc1, 0xc1, 0xc1})
		return nil
	})
	return damaged
}

// derivedSites lists the path, below the collection "cms" of the file at
// path, of every entry derived from the records: versions, the fold's copy
// of them, and each index's byValue and byKey entries.
func derivedSites(t *testing.T, path string) [][][]byte {
	t.Helper()
	var sites [][][]byte
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	add := func(b *bolt.Bucket, path ...[]byte) error {
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			sites = append(sites, append(slices.Clone(path), bytes.Clone(k)))
			return nil
		})
	}
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		if err := add(b.Bucket(format.VersionsBucket), format.VersionsBucket); err != nil {
			return err
		}
		if rb := b.Bucket(format.RebuildBucket); rb != nil {
			if err := add(rb.Bucket(format.VersionsBucket), format.RebuildBucket, format.VersionsBucket); err != nil {
				return err
			}
		}
		idx := b.Bucket(format.IndexesBucket)
		return idx.ForEachBucket(func(name []byte) error {
			for _, sub := range [][]byte{format.ByValueBucket, format.ByKeyBucket} {
				if err := add(idx.Bucket(name).Bucket(sub), format.IndexesBucket, bytes.Clone(name), sub); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return sites
}

// Paths that write the trees in place need them whole: an open that
// changes the collection, a bulk commit, an index build. A fold in
// progress is finished first, a chunk per transaction. Folding its copies
// back in the path's own transaction would write up to the whole
// collection in one, and bbolt holds a buffer per page it writes
// (BenchmarkOpenMidFoldPeakHeap).
func TestPathsThatNeedTheTreesWholeFinishTheFoldFirst(t *testing.T) {
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40, NoSync: true}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	for _, tc := range []struct {
		name string
		// run takes the path on the file at path, and returns the
		// collection and the model after it.
		run func(t *testing.T, path string, m journalModel) (*persist.DB, *persist.Collection)
	}{
		{"open", func(t *testing.T, path string, m journalModel) (*persist.DB, *persist.Collection) {
			db := openDB(t, path, dbOpts)
			open := opts
			open.Description = map[string]string{"changed": "yes"}
			c, err := db.Collection("cms", open)
			if err != nil {
				t.Fatal(err)
			}
			return db, c
		}},
		{"bulk commit", func(t *testing.T, path string, m journalModel) (*persist.DB, *persist.Collection) {
			bulk := dbOpts
			bulk.BatchLimit = 8
			db := openDB(t, path, bulk)
			c, err := db.Collection("cms", opts)
			if err != nil {
				t.Fatal(err)
			}
			var ops []persist.Op
			for i := range 8 {
				key := fmt.Sprintf("ns/bulk-%d", i)
				m[key] = [2]string{"", "900"}
				ops = append(ops, persist.Op{Key: key, Object: cm(key[len("ns/"):], "900")})
			}
			if err := c.Apply(ops, "900"); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			return db, c
		}},
		{"index build", func(t *testing.T, path string, m journalModel) (*persist.DB, *persist.Collection) {
			// byLabel stays dormant at the open, and is built again at
			// another version.
			db := openDB(t, path, dbOpts)
			c, err := db.Collection("cms", persist.CollectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddIndexes(t.Context(), map[string]string{"byLabel": "v2"}, journalIndexValues); err != nil {
				t.Fatal(err)
			}
			return db, c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			m := foldInProgress(t, path, dbOpts, opts)
			db, c := tc.run(t, path, m)
			if n := persist.FoldedBackForTest(db); n != 0 {
				t.Errorf("%d transactions folded the fold's copies back at once; want the fold finished a chunk per transaction", n)
			}
			if n, err := persist.FoldCopies(c); err != nil || n != -1 {
				t.Errorf("the fold's copies hold %d records (%v) after it, want none", n, err)
			}
			if err := persist.CheckTrees(c); err != nil {
				t.Fatal(err)
			}
			checkJournalModel(t, "after "+tc.name, c, m)
		})
	}
}
