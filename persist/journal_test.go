package persist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// journalModel is what a collection should hold: key -> label ("" for
// none) and resourceVersion.
type journalModel map[string][2]string

func journalOps(rng *rand.Rand, step int, m journalModel) []persist.Op {
	var ops []persist.Op
	for range 1 + rng.IntN(12) {
		key := fmt.Sprintf("ns/cm-%03d", rng.IntN(150))
		if _, ok := m[key]; ok && rng.IntN(5) == 0 {
			delete(m, key)
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

func journalIndexValues(_ string, obj runtime.Object) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if l := m.GetLabels()["l"]; l != "" {
		return []string{l}, nil
	}
	return nil, nil
}

// checkJournalModel compares every read of c with m.
func checkJournalModel(t *testing.T, what string, c *persist.Collection, m journalModel) {
	t.Helper()
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	keys, err := c.Keys()
	if err != nil {
		t.Fatalf("%s: Keys: %v", what, err)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("%s: keys\n got  %v\n want %v", what, keys, want)
	}
	rvs, err := c.ResourceVersions()
	if err != nil {
		t.Fatalf("%s: ResourceVersions: %v", what, err)
	}
	var walked []string
	err = c.ForEach(func(key string, obj runtime.Object) error {
		walked = append(walked, key)
		if got := obj.(*corev1.ConfigMap).ResourceVersion; got != m[key][1] {
			return fmt.Errorf("ForEach %s at %s, want %s", key, got, m[key][1])
		}
		return nil
	})
	if err != nil || !slices.Equal(walked, want) {
		t.Fatalf("%s: ForEach: %v; walked %d keys, want %d", what, err, len(walked), len(want))
	}
	byLabel := map[string][]string{}
	for _, key := range want {
		if rvs[key] != m[key][1] {
			t.Fatalf("%s: ResourceVersions[%s] = %q, want %q", what, key, rvs[key], m[key][1])
		}
		obj, ok, err := c.Get(key)
		if err != nil || !ok || obj.(*corev1.ConfigMap).ResourceVersion != m[key][1] {
			t.Fatalf("%s: Get(%s) = %v, %v, %v; want rv %s", what, key, obj, ok, err, m[key][1])
		}
		if l := m[key][0]; l != "" {
			byLabel[l] = append(byLabel[l], key)
		}
	}
	if len(rvs) != len(want) {
		t.Fatalf("%s: ResourceVersions has %d keys, want %d", what, len(rvs), len(want))
	}
	if n, err := c.Len(); err != nil || n != len(want) {
		t.Fatalf("%s: Len() = %d, %v; want %d", what, n, err, len(want))
	}
	versions, err := c.Versions()
	if err != nil || len(versions) != len(want) {
		t.Fatalf("%s: Versions has %d keys (%v), want %d", what, len(versions), err, len(want))
	}
	for _, key := range want {
		if v := versions[key]; v.ResourceVersion != m[key][1] || string(v.UID) != "uid-"+key[len("ns/"):] {
			t.Fatalf("%s: Versions[%s] = %+v, want rv %s", what, key, v, m[key][1])
		}
	}
	for _, l := range []string{"a", "b", "c"} {
		got, err := c.IndexKeys("byLabel", l)
		if err != nil || !slices.Equal(got, byLabel[l]) {
			t.Fatalf("%s: IndexKeys(%s) = %v, %v; want %v", what, l, got, err, byLabel[l])
		}
		objs, err := c.ByIndex("byLabel", l)
		if err != nil || len(objs) != len(byLabel[l]) {
			t.Fatalf("%s: ByIndex(%s) has %d objects (%v), want %d", what, l, len(objs), err, len(byLabel[l]))
		}
	}
	values, err := c.IndexValues("byLabel")
	if err != nil {
		t.Fatal(err)
	}
	wantValues := slices.Sorted(func(yield func(string) bool) {
		for l := range byLabel {
			if !yield(l) {
				return
			}
		}
	})
	if !slices.Equal(values, wantValues) && !(len(values) == 0 && len(wantValues) == 0) {
		t.Fatalf("%s: IndexValues = %v, want %v", what, values, wantValues)
	}
	stored, err := c.StoredIndexValues(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range want {
		var wantIdx map[string][]string
		if l := m[key][0]; l != "" {
			wantIdx = map[string][]string{"byLabel": {l}}
		}
		if got := stored[key]; !reflect.DeepEqual(got, wantIdx) && !(len(got) == 0 && len(wantIdx) == 0) {
			t.Fatalf("%s: StoredIndexValues[%s] = %v, want %v", what, key, got, wantIdx)
		}
	}
}

// TestJournalReadsAndReopens drives a collection through many commits, with
// folds spanning several of them. It compares every read with a model after
// each commit, through a bounded and an unbounded cache. It compares again
// after each reopen of the file, which reads the journal back.
func TestJournalReadsAndReopens(t *testing.T) {
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40}, 4<<10), 9)
	for _, bounded := range []bool{false, true} {
		t.Run(fmt.Sprintf("bounded=%v", bounded), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			rng := rand.New(rand.NewPCG(1, uint64(len(path))))
			m := journalModel{}
			opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
			if bounded {
				opts.CacheObjects = 10
			}
			seen := map[[2]int]int{} // (generations, folding) after a commit -> times
			step := 0
			for reopen := range 6 {
				db := openDB(t, path, dbOpts)
				c, err := db.Collection("cms", opts)
				if err != nil {
					t.Fatal(err)
				}
				checkJournalModel(t, fmt.Sprintf("reopen %d", reopen), c, m)
				// The journal's limit rests on the tree's record bytes,
				// counted across commits and reopens.
				if counted, actual, err := persist.TreeBytes(c); err != nil || (counted != actual && counted != -1) {
					t.Fatalf("reopen %d: the tree's record bytes counted %d, the tree holds %d (%v)", reopen, counted, actual, err)
				}
				for range 40 {
					step++
					if err := c.Apply(journalOps(rng, step, m), strconv.Itoa(step)); err != nil {
						t.Fatal(err)
					}
					if step%3 == 0 {
						checkJournalModel(t, fmt.Sprintf("step %d, applied", step), c, m)
					}
					if err := c.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					gens, folding := persist.JournalState(c)
					seen[[2]int{gens, boolInt(folding)}]++
					checkJournalModel(t, fmt.Sprintf("step %d, committed", step), c, m)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// The journal went through every state: appending, sealed and
			// folding while the next generation fills, folded away.
			for _, s := range [][2]int{{1, 0}, {2, 1}} {
				if seen[s] == 0 {
					t.Errorf("no commit left the journal with %d generations, folding=%d: %v", s[0], s[1], seen)
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSchemaOneFileIsUpgraded opens a file as the previous release wrote
// it, with schema 1 and no journal. Its objects read as before. Opening it
// for writing marks it schema 2. An older build then refuses it rather than
// ignore a journal.
func TestSchemaOneFileIsUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "5", cm("a", "5"), cm("b", "5"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	schema := func() string {
		bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer bdb.Close()
		var s string
		_ = bdb.View(func(tx *bolt.Tx) error {
			s = string(tx.Bucket([]byte("boltinformer")).Get([]byte("schema")))
			return nil
		})
		return s
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		// Schema 1 had no versions bucket either.
		if err := tx.Bucket([]byte("collections")).Bucket([]byte("cms")).DeleteBucket([]byte("versions")); err != nil {
			return err
		}
		return tx.Bucket([]byte("boltinformer")).Put([]byte("schema"), []byte("1"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()

	ro := openDB(t, path, persist.Options{ReadOnly: true})
	rc, err := ro.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatalf("schema 1, read-only: %v", err)
	}
	if keys, err := rc.Keys(); err != nil || len(keys) != 2 {
		t.Fatalf("schema 1 keys %v, %v", keys, err)
	}
	if v, err := rc.Versions(); err != nil || len(v) != 2 || v["ns/a"].ResourceVersion != "5" {
		t.Fatalf("schema 1, read-only: Versions() = %v, %v", v, err)
	}
	_ = ro.Close()
	if got := schema(); got != "1" {
		t.Fatalf("a read-only open changed the schema to %s", got)
	}
	rw := openDB(t, path, persist.Options{})
	wc, err := rw.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := wc.Versions(); err != nil || len(v) != 2 || v["ns/b"].ResourceVersion != "5" || v["ns/b"].UID != "uid-b" {
		t.Errorf("upgraded: Versions() = %v, %v", v, err)
	}
	_ = rw.Close()
	if got := schema(); got != "5" {
		t.Errorf("opened for writing, the file says schema %s, want 5", got)
	}
	// The versions bucket was built.
	bdb, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("collections")).Bucket([]byte("cms")).Bucket([]byte("versions")) == nil {
			t.Error("opened for writing, the collection still has no versions bucket")
		}
		return nil
	})
	_ = bdb.Close()
}

// TestTreeBytesCountedThroughResets checks the object tree's record bytes,
// on which the journal's limit rests. Every write keeps them, so no commit
// walks the tree to count them. They stay right after the collection is
// emptied, and after an index build folds the journal.
func TestTreeBytesCountedThroughResets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{BatchInterval: 1 << 40})
	c, err := db.Collection("cms", persist.CollectionOptions{Provenance: map[string]string{"list": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		counted, actual, err := persist.TreeBytes(c)
		if err != nil || counted != actual {
			t.Fatalf("%s: the tree's record bytes counted %d, the tree holds %d (%v)", what, counted, actual, err)
		}
	}
	put(t, c, "1", cm("a", "1"), cm("b", "1"))
	check("after a list")
	if _, err := c.CheckProvenance(context.Background(), map[string]string{"list": "b"}); err != nil {
		t.Fatal(err)
	}
	check("after a reset")
	put(t, c, "2", cm("c", "2"), cm("d", "2"))
	put(t, c, "3", cm("c", "3"))
	check("after a list and an update")
	if err := c.AddIndexes(context.Background(), map[string]string{"byLabel": "v1"}, journalIndexValues); err != nil {
		t.Fatal(err)
	}
	put(t, c, "4", cm("a", "4"))
	check("after an index build and an update")
}

// The journal's layers keep where each record is in the file, not the
// record. After a commit appends to the journal, and after a reopen loads
// it, they hold no record bytes, in bounded and unbounded mode. Every read
// still finds the journaled state.
func TestJournalRecordsStayInTheFile(t *testing.T) {
	for _, bound := range []int{0, 10} {
		t.Run(fmt.Sprintf("CacheObjects=%d", bound), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			open := func() (*persist.DB, *persist.Collection) {
				db := openDB(t, path, persist.Options{})
				c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: bound})
				if err != nil {
					t.Fatal(err)
				}
				return db, c
			}
			db, c := open()
			var objs []*corev1.ConfigMap
			for i := range 500 {
				objs = append(objs, cm(fmt.Sprintf("cm-%03d", i), "1"))
			}
			put(t, c, "1", objs...) // a list: straight into the trees
			for i := range 100 {    // updates, committed a few at a time: into the journal
				put(t, c, strconv.Itoa(i+2), cm(fmt.Sprintf("cm-%03d", i*5), strconv.Itoa(i+2)))
				if i%10 == 9 {
					if err := c.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if gens, _ := persist.JournalState(c); gens == 0 {
				t.Fatal("nothing was journaled")
			}
			if n := persist.JournalHeldBytes(c); n != 0 {
				t.Errorf("after the commits the journal's layers hold %d record bytes in memory", n)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, c = open()
			defer db.Close()
			if n := persist.JournalHeldBytes(c); n != 0 {
				t.Errorf("after a reopen the journal's layers hold %d record bytes in memory", n)
			}
			rvs, err := c.ResourceVersions()
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				key := fmt.Sprintf("ns/cm-%03d", i*5)
				if rvs[key] != strconv.Itoa(i+2) {
					t.Fatalf("%s at %q, want %d", key, rvs[key], i+2)
				}
				obj, ok, err := c.Get(key)
				if err != nil || !ok || obj.(*corev1.ConfigMap).ResourceVersion != strconv.Itoa(i+2) {
					t.Fatalf("Get(%s) = %v %v %v", key, obj, ok, err)
				}
			}
		})
	}
}

// A journal that cannot be read is set aside at open, as an unreadable
// record is. The collection opens with the state its trees hold, marked as
// owing a list, and says why. The next open finds no journal and the mark.
func TestUnreadableJournalIsSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "1", cm("a", "1"), cm("b", "1"))
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, c, "2", cm("a", "2")) // into the journal
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket([]byte("collections")).Bucket([]byte("cms")).Bucket([]byte("journal"))
		gen, _ := jb.Cursor().First()
		seq, _ := jb.Bucket(gen).Cursor().First()
		return jb.Bucket(gen).Put(seq, []byte("no journal entry"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		db = openDB(t, path, persist.Options{})
		c, err = db.Collection("cms", persist.CollectionOptions{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if why := c.JournalSetAside(); (why != nil) != (i == 0) || (why != nil && !errors.Is(why, persist.ErrCorruptRecord)) {
			t.Errorf("open %d: JournalSetAside() = %v", i, why)
		}
		if !c.MustList() {
			t.Errorf("open %d: the collection does not owe a list", i)
		}
		if rvs, err := c.ResourceVersions(); err != nil || rvs["ns/a"] != "1" || rvs["ns/b"] != "1" {
			t.Errorf("open %d: stored %v %v, want a and b as the trees hold them", i, rvs, err)
		}
		if c.ResourceVersion() != "2" {
			t.Errorf("open %d: resourceVersion %q, want the stored 2 (kept; the mark makes the owner list)", i, c.ResourceVersion())
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Reads of a closed collection that need the file fail with ErrClosed. The
// instance that reopened the collection may have folded the journal. The
// closed one still holds layers of it. Merging the two would return states
// that never were.
func TestReadsOfAClosedCollectionFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.WithJournalBytes(persist.Options{}, 1))
	defer db.Close()
	old, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, "1", cm("a", "1"), cm("b", "1"))
	if err := old.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, old, "2", cm("a", "2")) // journaled
	if err := old.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	reopened, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 8; i++ { // the journal is sealed and folded
		put(t, reopened, strconv.Itoa(i), cm("b", strconv.Itoa(i)))
		if err := reopened.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for name, read := range map[string]func() error{
		"Get":              func() error { _, _, err := old.Get("ns/b"); return err },
		"List":             func() error { _, err := old.List(); return err },
		"Keys":             func() error { _, err := old.Keys(); return err },
		"ResourceVersions": func() error { _, err := old.ResourceVersions(); return err },
		"ForEach":          func() error { return old.ForEach(func(string, runtime.Object) error { return nil }) },
	} {
		if err := read(); !errors.Is(err, persist.ErrClosed) {
			t.Errorf("%s on the closed collection = %v, want ErrClosed", name, err)
		}
	}
	// What the closed instance holds decoded in memory is its own last
	// state, and is still served, as a stopped informer's store is.
	if obj, ok, err := old.Get("ns/a"); err != nil || !ok || obj.(*corev1.ConfigMap).ResourceVersion != "2" {
		t.Errorf("cached Get on the closed collection = %v %v %v, want a@2", obj, ok, err)
	}
	if rvs, err := reopened.ResourceVersions(); err != nil || rvs["ns/a"] != "2" || rvs["ns/b"] != "7" {
		t.Errorf("the reopened collection holds %v %v", rvs, err)
	}
}

// Versions reads neither records nor objects: it answers even where every
// record is unreadable.
func TestVersionsReadNoRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "1", cm("a", "1"), cm("b", "1"), cm("c", "1"))
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, c, "2", cm("b", "2")) // journaled
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptPayload(t, path, "cms", "ns/a", false)
	corruptPayload(t, path, "cms", "ns/b", true)
	corruptPayload(t, path, "cms", "ns/c", false)
	db = openDB(t, path, persist.Options{})
	defer db.Close()
	if c, err = db.Collection("cms", persist.CollectionOptions{CacheObjects: 1}); err != nil {
		t.Fatal(err)
	}
	v, err := c.Versions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]persist.Version{"ns/a": {UID: "uid-a", ResourceVersion: "1"}, "ns/b": {UID: "uid-b", ResourceVersion: "2"}, "ns/c": {UID: "uid-c", ResourceVersion: "1"}}
	if !maps.Equal(v, want) {
		t.Errorf("Versions() = %v, want %v", v, want)
	}
}

// Upgrading a schema-2 file builds the versions index from the records. A
// record whose payload cannot be decoded still has its resourceVersion in
// its header. It is indexed with it, and no UID. So Versions and Len agree
// with Keys, and a recovery can delete the key. The same holds for a
// schema-2 journal entry, which carries no identity, folded by the
// upgrade.
func TestSchemaTwoUpgradeIndexesUndecodableRecords(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(fmt.Sprintf("journaled=%v", journaled), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			db := openDB(t, path, persist.Options{})
			c, err := db.Collection("cms", persist.CollectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			put(t, c, "1", cm("a", "1"), cm("b", "1"), cm("c", "1"))
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			wantB := "1"
			if journaled {
				put(t, c, "2", cm("b", "2"))
				wantB = "2"
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := bdb.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
				if err := b.DeleteBucket(format.VersionsBucket); err != nil {
					return err
				}
				if journaled { // as schema 2 wrote it: no identity
					jb := b.Bucket(format.JournalBucket)
					gen, _ := jb.Cursor().First()
					seq, raw := jb.Bucket(gen).Cursor().First()
					e, err := format.DecodeJournalEntry(raw)
					if err != nil {
						return err
					}
					e.UID, e.ResourceVersion = "", ""
					e.Record = bytes.Clone(e.Record)
					out, err := format.AppendJournalEntry(nil, e)
					if err != nil {
						return err
					}
					if err := jb.Bucket(gen).Put(bytes.Clone(seq), out); err != nil {
						return err
					}
				}
				return tx.Bucket(format.MetaBucket).Put(format.SchemaKey, []byte("2"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := bdb.Close(); err != nil {
				t.Fatal(err)
			}
			corruptPayload(t, path, "cms", "ns/b", journaled)

			db = openDB(t, path, persist.Options{})
			if c, err = db.Collection("cms", persist.CollectionOptions{CacheObjects: 1}); err != nil {
				t.Fatalf("opening the schema-2 collection for writing: %v", err)
			}
			keys, err := c.Keys()
			if err != nil || len(keys) != 3 {
				t.Fatalf("Keys() = %v, %v", keys, err)
			}
			v, err := c.Versions()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]persist.Version{"ns/a": {UID: "uid-a", ResourceVersion: "1"}, "ns/b": {ResourceVersion: wantB}, "ns/c": {UID: "uid-c", ResourceVersion: "1"}}
			if !maps.Equal(v, want) {
				t.Errorf("Versions() = %v, want %v", v, want)
			}
			if n, err := c.Len(); err != nil || n != 3 {
				t.Errorf("Len() = %d, %v, want 3 as Keys", n, err)
			}
		})
	}
}
