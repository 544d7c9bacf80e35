package persist_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// foldOps returns a batch of random changes to m: puts and label changes,
// deletions, and deletions of keys the collection lacks. Keys sort before,
// among and after each other, so a fold's merge meets changes at both ends
// of the trees and between their entries.
func foldOps(rng *rand.Rand, step int, m journalModel) []persist.Op {
	names := func() string {
		switch rng.IntN(10) {
		case 0:
			return fmt.Sprintf("a%d", rng.IntN(5)) // before the others
		case 1:
			return fmt.Sprintf("zz%d", rng.IntN(5)) // after the others
		default:
			return fmt.Sprintf("cm-%03d", rng.IntN(60))
		}
	}
	var ops []persist.Op
	for range 1 + rng.IntN(8) {
		key := "ns/" + names()
		if rng.IntN(4) == 0 {
			delete(m, key) // the key may be absent: a deletion of nothing
			ops = append(ops, persist.Op{Key: key, Delete: true})
			continue
		}
		label := []string{"", "a", "b", "c"}[rng.IntN(4)]
		rv := strconv.Itoa(step)
		m[key] = [2]string{label, rv}
		obj := cm(key[len("ns/"):], rv)
		op := persist.Op{Key: key, Object: obj}
		if label != "" {
			obj.Labels = map[string]string{"l": label}
			op.Indexes = map[string][]string{"byLabel": {label}}
		}
		ops = append(ops, op)
	}
	return ops
}

// TestFoldGenerator drives collections through seeded random changes, with
// journals small enough to be folded every few commits and folds that move
// a few keys per commit. So most commits find a fold in progress, with the
// trees split between their copies and what is left of them. After every
// commit, every read must agree with a model, the trees must be as a fold
// leaves them (persist.CheckTrees), and every fold must end. Reopens, and
// snapshots read by inspect, come in between.
func TestFoldGenerator(t *testing.T) {
	for seed := uint64(0); seed < 16; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runFoldGenerator(t, seed) })
	}
}

func runFoldGenerator(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 48))
	// A commit of bulkChanges or more writes the trees in place, folding
	// back a fold's copies first.
	const bulkChanges = 24
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40, BatchLimit: bulkChanges}, int64(512+rng.IntN(4096))), 1+rng.IntN(6))
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	if rng.IntN(2) == 0 {
		opts.CacheObjects = 5
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	open := func() (*persist.DB, *persist.Collection) {
		db := openDB(t, path, dbOpts)
		c, err := db.Collection("cms", opts)
		if err != nil {
			t.Fatal(err)
		}
		return db, c
	}
	db, c := open()
	m := journalModel{}
	folding, folds, commitsInFold := false, 0, 0
	commit := func(what string) {
		t.Helper()
		if err := c.Flush(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := persist.CheckTrees(c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkJournalModel(t, what, c, m)
		copies, err := persist.FoldCopies(c)
		if err != nil {
			t.Fatal(err)
		}
		_, nowFolding := persist.JournalState(c)
		switch {
		case folding && !nowFolding:
			folds++
			commitsInFold = 0
		case nowFolding:
			// A fold moves at least a key per commit, and the
			// collection holds at most 70.
			if commitsInFold++; commitsInFold > 200 {
				t.Fatalf("%s: a fold is still running after %d commits (its copies hold %d records)", what, commitsInFold, copies)
			}
		}
		folding = nowFolding
	}
	for step := 1; step <= 400; step++ {
		what := fmt.Sprintf("step %d", step)
		if err := c.Apply(foldOps(rng, step, m), strconv.Itoa(step)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rng.IntN(4) == 0 {
			continue // gathered into the next commit
		}
		commit(what)
		switch rng.IntN(30) {
		case 0:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, c = open()
			checkJournalModel(t, what+", reopened", c, m)
		case 1:
			// The index is built again, from the records, at open. The
			// open folds a fold's copies back, and the journal in.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			opts.Indexes = map[string]string{"byLabel": "v" + strconv.Itoa(step)}
			db, c = open()
			checkJournalModel(t, what+", reopened with the index built again", c, m)
		case 2, 3:
			var ops []persist.Op
			for len(ops) < bulkChanges {
				ops = append(ops, foldOps(rng, step, m)...)
			}
			if err := c.Apply(ops, strconv.Itoa(step)); err != nil {
				t.Fatal(err)
			}
			commit(what + ", a bulk commit")
		case 4:
			snap := filepath.Join(t.TempDir(), "snap.db")
			if err := db.SnapshotFile(ctx, snap); err != nil {
				t.Fatal(err)
			}
			checkSnapshot(t, what+", snapshot", snap, m)
		}
	}
	// Keep committing until the last fold ends.
	for step := 401; folding; step++ {
		if err := c.Apply(foldOps(rng, step, m), strconv.Itoa(step)); err != nil {
			t.Fatal(err)
		}
		commit(fmt.Sprintf("step %d, finishing", step))
	}
	if folds < 3 {
		t.Errorf("only %d folds ended", folds)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkSnapshot compares a snapshot, open read-only and read by inspect,
// with m.
func checkSnapshot(t *testing.T, what, path string, m journalModel) {
	t.Helper()
	db := openDB(t, path, persist.Options{ReadOnly: true})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	checkJournalModel(t, what, c, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	records, err := inspectfile.ReadRecords(path, "cms")
	if err != nil {
		t.Fatalf("%s: inspect: %v", what, err)
	}
	if len(records) != len(m) {
		t.Fatalf("%s: inspect reads %d records, want %d", what, len(records), len(m))
	}
	for key := range m {
		if records[key] == nil {
			t.Fatalf("%s: inspect lacks %s", what, key)
		}
	}
}

// foldInProgress fills a collection and changes it until a fold has
// written part of its copies, then closes the file. It returns the model
// of what the collection holds.
func foldInProgress(t *testing.T, path string, dbOpts persist.Options, opts persist.CollectionOptions) journalModel {
	t.Helper()
	return foldInProgressAt(t, path, dbOpts, opts, 3, 3)
}

// foldInProgressAt is foldInProgress with the changes drawn from seed,
// stopping once the copies hold more than copies records.
func foldInProgressAt(t *testing.T, path string, dbOpts persist.Options, opts persist.CollectionOptions, seed uint64, copies int) journalModel {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, path, dbOpts)
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 48))
	m := journalModel{}
	for step := 1; ; step++ {
		if step > 500 {
			t.Fatal("no fold wrote copies in 500 commits")
		}
		if err := c.Apply(foldOps(rng, step, m), strconv.Itoa(step)); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := persist.FoldCopies(c); err != nil {
			t.Fatal(err)
		} else if n > copies {
			break
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// A journal that cannot be read is set aside while a fold has written
// part of it into the copies of the trees. The copies are folded back, so
// the records hold some of the journal's states, which the index trees
// lack. The test is a generator: files closed at seeded points of a fold,
// each journal entry, of either generation, damaged or lost, and the
// journal's record garbled. Each is opened with IndexValues, and without,
// which an index the file holds at the version named does not need. Every
// open must succeed, set the journal aside with a list owed, and leave
// every key's record, version and index entries in agreement.
func TestJournalSetAsideDuringAFold(t *testing.T) {
	seed := *damageSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("damage seed %d (rerun with -damage.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40, NoSync: true}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	fixtures := 3
	if testing.Short() {
		fixtures = 1
	}
	for f := range fixtures {
		fseed, copies := rng.Uint64(), rng.IntN(12)
		t.Run(fmt.Sprintf("fixture%d", f), func(t *testing.T) {
			fixture := filepath.Join(t.TempDir(), "fixture.db")
			foldInProgressAt(t, fixture, dbOpts, opts, fseed, copies)
			for _, d := range journalDamages(t, fixture) {
				for _, withValues := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/IndexValues=%t", d.name, withValues), func(t *testing.T) {
						path := filepath.Join(t.TempDir(), "cache.db")
						copyFile(t, fixture, path)
						updateFile(t, path, d.apply)
						open := opts
						if !withValues {
							open.IndexValues = nil
						}
						db := openDB(t, path, dbOpts)
						c, err := db.Collection("cms", open)
						if err != nil {
							t.Fatalf("open: %v", err)
						}
						if c.JournalSetAside() == nil || !c.MustList() {
							t.Fatalf("JournalSetAside() = %v, MustList() = %v; want the journal set aside and a list owed", c.JournalSetAside(), c.MustList())
						}
						checkSetAsideAgrees(t, c)
						if err := db.Close(); err != nil {
							t.Fatal(err)
						}
						// The next open, without IndexValues, finds the
						// indexes as this one left them.
						db = openDB(t, path, dbOpts)
						c, err = db.Collection("cms", persist.CollectionOptions{Indexes: opts.Indexes})
						if err != nil {
							t.Fatalf("reopen without IndexValues: %v", err)
						}
						checkSetAsideAgrees(t, c)
					})
				}
			}
		})
	}
}

// checkSetAsideAgrees checks that every key of c has its record, version
// and index entries in agreement, and that the fold's copies are gone.
func checkSetAsideAgrees(t *testing.T, c *persist.Collection) {
	t.Helper()
	if n, err := persist.FoldCopies(c); err != nil || n != -1 {
		t.Errorf("after the set-aside the fold's copies hold %d records (%v), want none", n, err)
	}
	if err := persist.CheckTrees(c); err != nil {
		t.Fatal(err)
	}
	objs, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, obj := range objs {
		values, _ := journalIndexValues("byLabel", obj)
		for _, v := range values {
			want[v] = append(want[v], "ns/"+obj.(*corev1.ConfigMap).Name)
		}
	}
	for _, l := range []string{"a", "b", "c"} {
		got, err := c.IndexKeys("byLabel", l)
		slices.Sort(want[l])
		if err != nil || !slices.Equal(got, want[l]) {
			t.Errorf("IndexKeys(%s) = %v, %v; the records say %v", l, got, err, want[l])
		}
	}
	versions, err := c.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(objs) {
		t.Errorf("Versions has %d keys, the records %d", len(versions), len(objs))
	}
	for _, obj := range objs {
		cm := obj.(*corev1.ConfigMap)
		if v := versions["ns/"+cm.Name]; v.ResourceVersion != cm.ResourceVersion {
			t.Errorf("Versions[ns/%s] = %+v, the record is at %s", cm.Name, v, cm.ResourceVersion)
		}
	}
}

// journalDamage is one damage to the journal of the collection cms.
type journalDamage struct {
	name  string
	apply func(*bolt.Tx) error
}

// journalDamages lists, for the file at path, a garbled and a lost entry
// for each entry of each journal generation, and a garbled record of the
// journal.
func journalDamages(t *testing.T, path string) []journalDamage {
	t.Helper()
	coll := func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")) }
	out := []journalDamage{{"record/garbled", func(tx *bolt.Tx) error {
		return coll(tx).Bucket(format.CollMetaBucket).Put(format.JournalKey, []byte("no journal record"))
	}}}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.View(func(tx *bolt.Tx) error {
		jb := coll(tx).Bucket(format.JournalBucket)
		return jb.ForEachBucket(func(gen []byte) error {
			g, _ := format.ParseJournalSeq(gen)
			return jb.Bucket(gen).ForEach(func(k, _ []byte) error {
				seq, _ := format.ParseJournalSeq(k)
				gen, k := bytes.Clone(gen), bytes.Clone(k)
				entry := func(tx *bolt.Tx) *bolt.Bucket { return coll(tx).Bucket(format.JournalBucket).Bucket(gen) }
				out = append(out,
					journalDamage{fmt.Sprintf("gen%d/entry%d/garbled", g, seq), func(tx *bolt.Tx) error { return entry(tx).Put(k, []byte("no journal entry")) }},
					journalDamage{fmt.Sprintf("gen%d/entry%d/lost", g, seq), func(tx *bolt.Tx) error { return entry(tx).Delete(k) }})
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// damageNewestJournalEntry overwrites the newest entry of the newest
// journal generation of the collection cms in the closed file at path.
func damageNewestJournalEntry(t *testing.T, path string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.JournalBucket)
		gen, _ := jb.Cursor().Last()
		for ; gen != nil && jb.Bucket(gen) == nil; gen, _ = jb.Cursor().Prev() {
		}
		gb := jb.Bucket(gen)
		seq, _ := gb.Cursor().Last()
		return gb.Put(seq, []byte("no journal entry"))
	}); err != nil {
		t.Fatal(err)
	}
}

// A schema-3 file may hold a fold in place in progress: the trees hold the
// folding generation's keys up to the one it recorded (format.FoldedKey).
// This build opens it as a generation being folded, folds it afresh, and
// marks the file with this build's schema (5), which older builds refuse.
func TestSchemaThreeFoldInProgressIsFoldedAfresh(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40}, 1<<30)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	db := openDB(t, path, dbOpts)
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 48))
	m := journalModel{}
	for step := 1; step <= 30; step++ {
		if err := c.Apply(foldOps(rng, step, m), strconv.Itoa(step)); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if gens, folding := persist.JournalState(c); gens != 1 || folding {
		t.Fatalf("the journal has %d generations, folding=%v; want one, appended to", gens, folding)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Mark the generation as a schema-3 fold leaves it midway.
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.JournalBucket)
		gen, _ := jb.Cursor().First()
		_, raw := jb.Bucket(gen).Cursor().First()
		e, err := format.DecodeJournalEntry(raw)
		if err != nil {
			return err
		}
		if err := jb.Put(format.FoldedKey, []byte(e.Key)); err != nil {
			return err
		}
		return tx.Bucket(format.MetaBucket).Put(format.SchemaKey, []byte("3"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()

	dbOpts = persist.WithFoldChunk(dbOpts, 3)
	db = openDB(t, path, dbOpts)
	if c, err = db.Collection("cms", opts); err != nil {
		t.Fatal(err)
	}
	checkJournalModel(t, "reopened", c, m)
	if _, folding := persist.JournalState(c); !folding {
		t.Fatal("the generation a schema-3 fold was folding is not being folded")
	}
	for step := 31; ; step++ {
		if step > 300 {
			t.Fatal("the fold did not end")
		}
		if err := c.Apply(foldOps(rng, step, m), strconv.Itoa(step)); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := persist.CheckTrees(c); err != nil {
			t.Fatal(err)
		}
		checkJournalModel(t, fmt.Sprintf("step %d", step), c, m)
		if gens, folding := persist.JournalState(c); gens == 1 && !folding {
			break
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *bolt.Tx) error {
		if s := string(tx.Bucket(format.MetaBucket).Get(format.SchemaKey)); s != "5" {
			t.Errorf("the file says schema %s, want 5", s)
		}
		if tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.JournalBucket).Get(format.FoldedKey) != nil {
			t.Error("the schema-3 fold's last key is still recorded")
		}
		return nil
	})
}
