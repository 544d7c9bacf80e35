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
						if c.RebuiltAtOpen() == nil {
							t.Errorf("RebuiltAtOpen() = nil, want the damaged entry found and rebuilt")
						}
						if c.MustList() || c.JournalSetAside() != nil || c.DamageSetAside() != nil {
							t.Errorf("MustList %t, JournalSetAside %v, DamageSetAside %v; want nothing set aside for a derived entry", c.MustList(), c.JournalSetAside(), c.DamageSetAside())
						}
						checkJournalModel(t, "after the writable open", c, m)
					})
				}
			}
		})
	}
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
