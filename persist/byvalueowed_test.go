package persist_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// fillNode is a node-name index value that scatters over the keys, as Pods'
// nodes do: consecutive keys have unrelated values.
func fillNode(i int) string {
	h := fnv.New32a()
	fmt.Fprint(h, i)
	return fmt.Sprintf("node-%03d", h.Sum32()%200)
}

func fillNodeIndex(_ string, obj runtime.Object) ([]string, error) {
	return []string{obj.(*corev1.ConfigMap).Labels["node"]}, nil
}

// fillPagesWritten fills a new collection with n ConfigMaps, a commit per
// batch of keys and none of them with a resourceVersion, as a paged list
// loads. A last commit stores the resourceVersion. With indexed, the
// objects are indexed by a scattered node value. It returns the bytes of
// pages the file wrote. Pages are 4 KiB, so that the leaves each commit
// rewrites at the end of each tree weigh little.
func fillPagesWritten(t *testing.T, n, batch int, indexed bool) int64 {
	t.Helper()
	// No write-ahead: each batch is one transaction.
	opts := persist.WithWriteAhead(persist.Options{PageSize: 4096}, n, nil)
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), opts)
	var copts persist.CollectionOptions
	if indexed {
		copts = persist.CollectionOptions{Indexes: map[string]string{"node": "1"}, IndexValues: fillNodeIndex}
	}
	c, err := db.Collection("cms", copts)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += batch {
		var ops []persist.Op
		for i := start; i < min(start+batch, n); i++ {
			obj := cm(fmt.Sprintf("cm-%06d", i), fmt.Sprint(i+1))
			obj.Labels = map[string]string{"node": fillNode(i)}
			op := persist.Op{Key: "ns/" + obj.Name, Object: obj}
			if indexed {
				op.Indexes = map[string][]string{"node": {fillNode(i)}}
			}
			ops = append(ops, op)
		}
		if err := c.Apply(ops, ""); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Apply(nil, fmt.Sprint(n+1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return persist.PagesWritten(db)
}

// A list loaded page by page into an empty collection writes each index
// entry about once, as it writes each record. Its keys come in key order,
// but an index's entries sort by value, so each page's entries land all over
// the index tree. Written in place, every commit of the list would rewrite
// most of the tree's leaves.
func TestFillWritesIndexEntriesAboutOnce(t *testing.T) {
	const n, page = 20000, 500
	index := func(batch int) int64 {
		return fillPagesWritten(t, n, batch, true) - fillPagesWritten(t, n, batch, false)
	}
	whole, paged := index(n), index(page)
	ratio := float64(paged) / float64(whole)
	t.Logf("%d objects: the index wrote %d KiB in pages of %d, %d KiB in one commit: %.2f×", n, paged>>10, page, whole>>10, ratio)
	if ratio > 2 {
		t.Errorf("the index of a list in pages of %d wrote %.2f× its bytes in one commit, want at most 2×", page, ratio)
	}
}

// owedIndexes are the generator's indexes: a node, which scatters over the
// keys, and zones, of which an object may have several.
var owedIndexes = map[string]string{"node": "1", "zone": "1"}

// owedUniverse is every value the generator gives each index.
var owedUniverse = map[string][]string{
	"node": {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"},
	"zone": {"a", "b", "c"},
}

func owedIndexValues(index string, obj runtime.Object) ([]string, error) {
	v := obj.(*corev1.ConfigMap).Labels[index]
	if v == "" {
		return nil, nil
	}
	return strings.Split(v, "."), nil
}

// owedObject draws an object's labels: no node or one, and up to three
// zones.
func owedObject(rng *rand.Rand, key, rv string) (*corev1.ConfigMap, map[string][]string) {
	_, name, _ := strings.Cut(key, "/")
	obj := cm(name, rv)
	obj.Labels = map[string]string{}
	values := map[string][]string{}
	if rng.IntN(5) > 0 {
		values["node"] = []string{owedUniverse["node"][rng.IntN(len(owedUniverse["node"]))]}
	}
	for _, z := range owedUniverse["zone"] {
		if rng.IntN(3) == 0 {
			values["zone"] = append(values["zone"], z)
		}
	}
	for index, vs := range values {
		obj.Labels[index] = strings.Join(vs, ".")
	}
	return obj, values
}

// owedModel maps each key to its index values.
type owedModel map[string]map[string][]string

func (m owedModel) keys(index, value string) []string {
	var keys []string
	for key, values := range m {
		if slices.Contains(values[index], value) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// checkOwedReads checks every index lookup of c against m.
func checkOwedReads(t *testing.T, what string, c *persist.Collection, m owedModel) {
	t.Helper()
	for index, universe := range owedUniverse {
		var present []string
		for _, value := range universe {
			want := m.keys(index, value)
			if len(want) > 0 {
				present = append(present, value)
			}
			got, err := c.IndexKeys(index, value)
			if err != nil {
				t.Fatalf("%s: IndexKeys(%s, %s): %v", what, index, value, err)
			}
			if !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("%s: IndexKeys(%s, %s) = %v, want %v", what, index, value, got, want)
			}
			objs, err := c.ByIndex(index, value)
			if err != nil || len(objs) != len(want) {
				t.Fatalf("%s: ByIndex(%s, %s) = %d objects (%v), want %d", what, index, value, len(objs), err, len(want))
			}
		}
		got, err := c.IndexValues(index)
		sort.Strings(got)
		if err != nil || (!slices.Equal(got, present) && len(got)+len(present) > 0) {
			t.Fatalf("%s: IndexValues(%s) = %v (%v), want %v", what, index, got, err, present)
		}
	}
}

// checkOwedFile checks what a read-only open and inspectfile read of the
// file at path: every index entry, against the file's own objects. So it
// needs no model, and checks a snapshot taken at any commit.
func checkOwedFile(t *testing.T, what, path string) (owed bool) {
	t.Helper()
	// A bounded cache reads every lookup from the file.
	db, err := persist.Open(path, persist.Options{ReadOnly: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	bounded, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 2})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	checkOwedReads(t, what+", read-only and bounded", bounded, fileModel(t, what, bounded))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := inspectfile.Open(path, inspectfile.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer f.Close()
	c, err := f.DB().Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	m := fileModel(t, what, c)
	checkOwedReads(t, what+", read-only", c, m)
	err = f.View("cms", func(r *inspectfile.Collection) error {
		owed = r.ByValueOwed()
		if rv := c.ResourceVersion(); owed && rv != "" {
			t.Errorf("%s: the file owes byValue entries, yet has resourceVersion %q and may be resumed", what, rv)
		}
		for index := range owedIndexes {
			var got []string
			if err := r.ForEachIndexEntry(index, func(value, key string, _ []byte, err error) error {
				got = append(got, value+"→"+key)
				if ok, herr := r.HasIndexEntry(index, value, key); !ok || herr != nil {
					t.Errorf("%s: HasIndexEntry(%s, %s, %s) = %v, %v after ForEachIndexEntry gave it", what, index, value, key, ok, herr)
				}
				return err
			}); err != nil {
				return err
			}
			var want []string
			for _, value := range owedUniverse[index] {
				for _, key := range m.keys(index, value) {
					want = append(want, value+"→"+key)
				}
			}
			if !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Errorf("%s: inspectfile's %s entries %v, want %v", what, index, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return owed
}

// fileModel returns the index values of c's objects.
func fileModel(t *testing.T, what string, c *persist.Collection) owedModel {
	t.Helper()
	m := owedModel{}
	err := c.ForEach(func(key string, obj runtime.Object) error {
		m[key] = map[string][]string{}
		for index := range owedIndexes {
			values, _ := owedIndexValues(index, obj)
			if len(values) > 0 {
				m[key][index] = values
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return m
}

// owedSeen counts the files the generator found owing, over all seeds, so
// that the test fails if it never exercised the mark.
var owedSeen atomic.Int64

// TestByValueOwedGenerator drives collections through seeded fills without
// a resourceVersion, changes, commits, stored resourceVersions, folds and
// reopens, unbounded and bounded. Every read in process, read-only and
// through inspectfile must agree with the objects, whether the byValue
// entries are owed or paid. Snapshots taken between the transactions of a
// write-ahead stand for a crash there.
func TestByValueOwedGenerator(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	owedSeen.Store(0)
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runByValueOwed(t, uint64(seed)) })
	}
	if owedSeen.Load() == 0 {
		t.Error("no file the generator read owed its byValue entries: the mark was never exercised")
	}
}

func runByValueOwed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x0bed))
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	// The write-ahead hook runs in the commit's goroutine. It draws from a
	// generator of its own, and mu guards what it shares with the test.
	var mu sync.Mutex
	hookRng := rand.New(rand.NewPCG(seed, 0x5a4b))
	var snapshots []string
	var db *persist.DB
	dbOpts := persist.Options{BatchInterval: time.Hour, PageSize: 4096, Scheme: scheme.Scheme}
	dbOpts = persist.WithWriteAhead(dbOpts, 4+rng.IntN(16), func(string) {
		mu.Lock()
		defer mu.Unlock()
		if hookRng.IntN(3) > 0 {
			return
		}
		snap := filepath.Join(dir, fmt.Sprintf("snap-%d.db", len(snapshots)))
		f, err := os.Create(snap)
		if err == nil {
			_, err = db.Snapshot(f)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Errorf("snapshot: %v", err)
		}
		snapshots = append(snapshots, snap)
	})
	if rng.IntN(2) == 0 {
		dbOpts = persist.WithJournalBytes(dbOpts, int64(2000+rng.IntN(20000)))
	}
	var c *persist.Collection
	open := func() {
		opened, err := persist.Open(path, dbOpts)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		db = opened
		mu.Unlock()
		copts := persist.CollectionOptions{Indexes: owedIndexes, IndexValues: owedIndexValues}
		if rng.IntN(3) == 0 {
			copts.CacheObjects = 1 + rng.IntN(5)
		}
		if c, err = db.Collection("cms", copts); err != nil {
			t.Fatal(err)
		}
		if owed, err := persist.ByValueOwed(c); owed || err != nil {
			t.Fatalf("a writable open left the byValue entries owed (%v)", err)
		}
	}
	open()
	defer func() { db.Close() }()

	m := owedModel{}
	next, rv := 0, 0
	stored := false // a resourceVersion was applied
	apply := func(ops []persist.Op) {
		arg := ""
		if stored && rng.IntN(6) > 0 { // now and then a change without one clears it
			rv++
			arg = fmt.Sprint(rv)
		}
		if err := c.Apply(ops, arg); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 60 {
		what := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(20); {
		case r < 7: // a page of a list: new keys after the stored ones
			var ops []persist.Op
			for range 1 + rng.IntN(40) {
				key := fmt.Sprintf("ns/k-%05d", next)
				next++
				obj, values := owedObject(rng, key, "1")
				ops = append(ops, persist.Op{Key: key, Object: obj, Indexes: values})
				m[key] = values
			}
			apply(ops)
		case r < 11: // changes and deletions of stored keys
			var ops []persist.Op
			for _, key := range slices.Sorted(maps.Keys(m)) { // sorted: a seed replays
				if rng.IntN(4) > 0 {
					continue
				}
				if rng.IntN(3) == 0 {
					ops = append(ops, persist.Op{Key: key, Delete: true})
					delete(m, key)
					continue
				}
				obj, values := owedObject(rng, key, "2")
				ops = append(ops, persist.Op{Key: key, Object: obj, Indexes: values})
				m[key] = values
			}
			apply(ops)
		case r < 14:
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		case r < 15:
			stored = true
			apply(nil)
		case r < 18:
			checkOwedReads(t, what, c, m)
		default: // a restart, with the file read as tools read it between
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if checkOwedFile(t, what+", closed", path) {
				owedSeen.Add(1)
			}
			open()
			checkOwedReads(t, what+", reopened", c, m)
		}
	}
	checkOwedReads(t, "at the end", c, m)
	mu.Lock()
	defer mu.Unlock()
	for _, snap := range snapshots {
		if checkOwedFile(t, "snapshot "+filepath.Base(snap), snap) {
			owedSeen.Add(1)
		}
	}
}

// fillOwed fills a collection with objects and no resourceVersion, so that
// its byValue entries are owed, and closes the file.
func fillOwed(t *testing.T, path string, n int) {
	t.Helper()
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"node": "1"}, IndexValues: fillNodeIndex})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persist.Op
	for i := range n {
		obj := cm(fmt.Sprintf("cm-%06d", i), "1")
		obj.Labels = map[string]string{"node": fillNode(i)}
		ops = append(ops, persist.Op{Key: "ns/" + obj.Name, Object: obj, Indexes: map[string][]string{"node": {fillNode(i)}}})
	}
	if err := c.Apply(ops, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if owed, err := persist.ByValueOwed(c); !owed || err != nil {
		t.Fatalf("the fill left byValue paid (%v)", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// An index bucket the collection does not record is no index in use: an
// open ignores it, and the first write drops it. Damage may leave one
// without its byKey bucket, or with a byKey value that does not decode.
// Paying an owed collection's byValue builds every bucket below indexes,
// recorded or not, so such damage must not fail the open (or, at the
// commit of the resourceVersion, every commit of the file).
func TestOwedOpenIgnoresUnrecordedIndexBucket(t *testing.T) {
	for name, damage := range map[string]func(ib *bolt.Bucket) error{
		"no byKey": func(ib *bolt.Bucket) error {
			_, err := ib.CreateBucket(format.ByValueBucket)
			return err
		},
		"undecodable byKey": func(ib *bolt.Bucket) error {
			if _, err := ib.CreateBucket(format.ByValueBucket); err != nil {
				return err
			}
			bk, err := ib.CreateBucket(format.ByKeyBucket)
			if err != nil {
				return err
			}
			return bk.Put([]byte("ns/cm-000000"), []byte{0xc1})
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			fillOwed(t, path, 10)
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error {
				coll := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
				ib, err := coll.Bucket(format.IndexesBucket).CreateBucket([]byte("stray"))
				if err != nil {
					return err
				}
				return damage(ib)
			})
			if cerr := bdb.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t, path, persist.Options{})
			c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"node": "1"}, IndexValues: fillNodeIndex})
			if err != nil {
				t.Fatalf("writable open of an owed collection with a stray index bucket (%s): %v", name, err)
			}
			if err := c.Apply(nil, "100"); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(context.Background()); err != nil {
				t.Fatalf("commit of the resourceVersion: %v", err)
			}
		})
	}
}

// clearedRVPagesWritten stores n indexed objects at a resourceVersion, then
// commits a change at middleRV and one more at a resourceVersion. It
// returns the bytes of pages the last two commits allocated. The journal is off, so
// each change is written into the trees.
func clearedRVPagesWritten(t *testing.T, n int, middleRV string) int64 {
	t.Helper()
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{PageSize: 4096, JournalShare: -1})
	c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"node": "1"}, IndexValues: fillNodeIndex})
	if err != nil {
		t.Fatal(err)
	}
	op := func(i int, rv string) persist.Op {
		obj := cm(fmt.Sprintf("cm-%06d", i), rv)
		obj.Labels = map[string]string{"node": fillNode(i + len(rv))}
		return persist.Op{Key: "ns/" + obj.Name, Object: obj, Indexes: map[string][]string{"node": {obj.Labels["node"]}}}
	}
	commit := func(ops []persist.Op, rv string) {
		t.Helper()
		if err := c.Apply(ops, rv); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var ops []persist.Op
	for i := range n {
		ops = append(ops, op(i, "1"))
	}
	commit(ops, "1")
	before := persist.PagesWritten(db)
	commit([]persist.Op{op(7, middleRV)}, middleRV)
	commit([]persist.Op{op(8, "3")}, "3")
	return persist.PagesWritten(db) - before
}

// A commit of one change at a resourceVersion writes a few pages, however
// large the collection. A commit that stored no resourceVersion before it,
// as the cache's Update of an object without one stores (Indexer.rvAfter),
// must not make it rebuild every index's byValue tree.
func TestCommitAfterClearedResourceVersionRebuildsNoIndex(t *testing.T) {
	const n = 20000
	cleared, kept := clearedRVPagesWritten(t, n, ""), clearedRVPagesWritten(t, n, "2")
	t.Logf("%d objects: two one-change commits allocated %d bytes of pages after a commit without a resourceVersion, %d after one with", n, cleared, kept)
	if cleared > 2*kept {
		t.Errorf("two one-change commits of a %d-object collection allocated %d bytes of pages when the first stored no resourceVersion, %d when it stored one: the second rebuilt the index", n, cleared, kept)
	}
}
