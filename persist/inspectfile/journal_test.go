package inspectfile_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

const coll = "configmaps"

// configMap returns ConfigMap ns/name at resourceVersion rv, labelled
// app=app unless app is "".
func configMap(name, rv, app string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	if app != "" {
		cm.Labels = map[string]string{"app": app}
	}
	return cm
}

// indexValues are a ConfigMap's values for the collection's two indexes,
// as persist stores them (an index without values is left out).
func indexValues(cm *corev1.ConfigMap) map[string][]string {
	out := map[string][]string{"namespace": {cm.Namespace}}
	if app := cm.Labels["app"]; app != "" {
		out["app"] = []string{app}
	}
	return out
}

// writeTreeFile writes ns/a (app x), ns/c (y), ns/e (x) and ns/g (z) with
// persist and closes the file, which leaves them in the object and index
// trees and the journal empty (TestWithoutJournalReadsTheTrees checks).
func writeTreeFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Collection(coll, persist.CollectionOptions{
		Indexes: map[string]string{"namespace": "v1", "app": "v1"},
		IndexValues: func(_ string, obj runtime.Object) ([]string, error) {
			t.Fatal("no index is rebuilt")
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persist.Op
	for _, cm := range []*corev1.ConfigMap{configMap("a", "1", "x"), configMap("c", "2", "y"), configMap("e", "3", "x"), configMap("g", "4", "z")} {
		ops = append(ops, persist.Op{Key: "ns/" + cm.Name, Object: cm, Indexes: indexValues(cm)})
	}
	if err := c.Apply(ops, "4"); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// addJournal adds journal buckets below the collection with raw bbolt, the
// way a schema-2 writer would, leaving the trees as they are:
//
//	generation 1: ns/a → app y; delete ns/c; create ns/d (x); ns/e → app q; create ns/f
//	generation 2: ns/e → apps w and x; ns/g → no app; delete ns/f
//
// and marks generation 1 folded through ns/a.
func addJournal(t *testing.T, path string) {
	t.Helper()
	codec := persist.NewCodec(scheme.Scheme)
	put := func(cm *corev1.ConfigMap) format.JournalEntry {
		rec, err := codec.Encode(cm)
		if err != nil {
			t.Fatal(err)
		}
		return format.JournalEntry{Key: "ns/" + cm.Name, Indexes: indexValues(cm), Record: rec}
	}
	del := func(key string) format.JournalEntry { return format.JournalEntry{Key: key, Deleted: true} }
	gens := map[uint64][]format.JournalEntry{
		1: {put(configMap("a", "5", "y")), del("ns/c"), put(configMap("d", "6", "x")), put(configMap("e", "7", "q")), put(configMap("f", "8", "x"))},
		2: {func() format.JournalEntry {
			e := put(configMap("e", "9", "w"))
			e.Indexes["app"] = []string{"w", "x"}
			return e
		}(), put(configMap("g", "10", "")), del("ns/f")},
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		jb, err := tx.Bucket(format.CollectionsBucket).Bucket([]byte(coll)).CreateBucketIfNotExists(format.JournalBucket)
		if err != nil {
			return err
		}
		for _, gen := range []uint64{1, 2} {
			gb, err := jb.CreateBucket(format.JournalSeq(gen))
			if err != nil {
				return err
			}
			seq := uint64(0) // each generation's entries run from 1, as commits write them
			for _, e := range gens[gen] {
				raw, err := format.AppendJournalEntry(nil, e)
				if err != nil {
					return err
				}
				seq++
				if err := gb.Put(format.JournalSeq(seq), raw); err != nil {
					return err
				}
			}
		}
		return jb.Put(format.FoldedKey, []byte("ns/a"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// state is what a Collection's reads return.
type state struct {
	records     map[string]string // key → resourceVersion
	keys        []string          // ForEachRecord's order
	fileKeys    []string          // File.Records' order
	entries     map[string][]string
	indexedKeys map[string][]string
}

func readState(t *testing.T, f *inspectfile.File) state {
	t.Helper()
	s := state{records: map[string]string{}, entries: map[string][]string{}, indexedKeys: map[string][]string{}}
	err := f.View(coll, func(c *inspectfile.Collection) error {
		if err := c.ForEachRecord(func(key string, rec []byte) error {
			rv, err := format.ReadResourceVersion(rec)
			s.keys = append(s.keys, key)
			s.records[key] = rv
			return err
		}); err != nil {
			return err
		}
		for _, index := range []string{"namespace", "app"} {
			if err := c.ForEachIndexEntry(index, func(value, key string, _ []byte, err error) error {
				s.entries[index] = append(s.entries[index], value+"→"+key)
				return err
			}); err != nil {
				return err
			}
			if err := c.ForEachIndexedKey(index, func(key string, values []string, err error) error {
				s.indexedKeys[index] = append(s.indexedKeys[index], key+"→"+join(values))
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Records(coll, func(key string, _ []byte) error {
		s.fileKeys = append(s.fileKeys, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func join(values []string) string {
	out := ""
	for i, v := range values {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

// rawState reads the trees with raw bbolt, as inspectfile read them before
// the journal: what a file without a journal must still read as.
func rawState(t *testing.T, path string) state {
	t.Helper()
	s := state{records: map[string]string{}, entries: map[string][]string{}, indexedKeys: map[string][]string{}}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte(coll))
		if err := b.Bucket(format.ObjectsBucket).ForEach(func(k, v []byte) error {
			rv, err := format.ReadResourceVersion(v)
			s.keys = append(s.keys, string(k))
			s.fileKeys = append(s.fileKeys, string(k))
			s.records[string(k)] = rv
			return err
		}); err != nil {
			return err
		}
		for _, index := range []string{"namespace", "app"} {
			ib := b.Bucket(format.IndexesBucket).Bucket([]byte(index))
			if err := ib.Bucket(format.ByValueBucket).ForEach(func(k, v []byte) error {
				value, key, _, err := format.DecodeIndexEntry(k, v)
				s.entries[index] = append(s.entries[index], value+"→"+key)
				return err
			}); err != nil {
				return err
			}
			if err := ib.Bucket(format.ByKeyBucket).ForEach(func(k, v []byte) error {
				values, err := format.DecodeIndexValues(v)
				s.indexedKeys[index] = append(s.indexedKeys[index], string(k)+"→"+join(values))
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t *testing.T, path string) *inspectfile.File {
	t.Helper()
	f, err := inspectfile.Open(path, inspectfile.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWithoutJournalReadsTheTrees checks that a file without a journal
// (schema 1, or one whose journal was folded) reads exactly what its trees
// hold, and shows no journal.
func TestWithoutJournalReadsTheTrees(t *testing.T) {
	path := writeTreeFile(t)
	want := rawState(t, path)
	if got := readState(t, open(t, path)); !reflect.DeepEqual(got, want) {
		t.Errorf("reads\n%+v\nwant the trees'\n%+v", got, want)
	}
	if want.keys == nil || len(want.entries["app"]) != 4 {
		t.Fatalf("the fixture holds %+v", want)
	}
	err := open(t, path).View(coll, func(c *inspectfile.Collection) error {
		j, err := c.Journal()
		if err != nil || !reflect.DeepEqual(j, format.Journal{}) {
			t.Errorf("Journal() = %+v, %v; want an empty one", j, err)
		}
		stats, err := c.Stats()
		for _, s := range stats {
			if filepath.Dir(s.Bucket) == "journal" {
				t.Errorf("Stats lists %s", s.Bucket)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadsMergeTheJournal checks that records and both sides of every
// index are read as the trees with the journal applied.
func TestReadsMergeTheJournal(t *testing.T) {
	path := writeTreeFile(t)
	addJournal(t, path)
	f := open(t, path)

	got := readState(t, f)
	want := state{
		records:  map[string]string{"ns/a": "5", "ns/d": "6", "ns/e": "9", "ns/g": "10"},
		keys:     []string{"ns/a", "ns/d", "ns/e", "ns/g"},
		fileKeys: []string{"ns/a", "ns/d", "ns/e", "ns/g"},
		entries: map[string][]string{
			"namespace": {"ns→ns/a", "ns→ns/d", "ns→ns/e", "ns→ns/g"},
			"app":       {"w→ns/e", "x→ns/d", "x→ns/e", "y→ns/a"},
		},
		indexedKeys: map[string][]string{
			"namespace": {"ns/a→ns", "ns/d→ns", "ns/e→ns", "ns/g→ns"},
			"app":       {"ns/a→y", "ns/d→x", "ns/e→w,x"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reads\n%+v\nwant\n%+v", got, want)
	}

	err := f.View(coll, func(c *inspectfile.Collection) error {
		for key, wantRV := range map[string]string{"ns/a": "5", "ns/c": "", "ns/d": "6", "ns/f": "", "ns/g": "10"} {
			rec, err := c.Record(key)
			if err != nil {
				return err
			}
			rv := ""
			if rec != nil {
				if rv, err = format.ReadResourceVersion(rec); err != nil {
					return err
				}
			}
			if rv != wantRV {
				t.Errorf("Record(%q) has resourceVersion %q, want %q", key, rv, wantRV)
			}
		}
		for _, tc := range []struct {
			index, value, key string
			want              bool
		}{
			{"app", "x", "ns/a", false}, // in the tree, replaced by the journal
			{"app", "y", "ns/a", true},
			{"app", "y", "ns/c", false}, // deleted
			{"app", "x", "ns/d", true},  // created
			{"app", "q", "ns/e", false}, // overridden by the newer generation
			{"app", "w", "ns/e", true},
			{"app", "z", "ns/g", false}, // value removed
			{"namespace", "ns", "ns/g", true},
			{"namespace", "ns", "ns/f", false},
		} {
			ok, err := c.HasIndexEntry(tc.index, tc.value, tc.key)
			if err != nil || ok != tc.want {
				t.Errorf("HasIndexEntry(%q, %q, %q) = %t, %v; want %t", tc.index, tc.value, tc.key, ok, err, tc.want)
			}
		}
		for _, tc := range []struct {
			index, key string
			want       []string
		}{
			{"app", "ns/a", []string{"y"}},
			{"app", "ns/c", nil},
			{"app", "ns/e", []string{"w", "x"}},
			{"app", "ns/g", nil},
			{"namespace", "ns/g", []string{"ns"}},
		} {
			values, ok, err := c.IndexedValues(tc.index, tc.key)
			if err != nil || !reflect.DeepEqual(values, tc.want) || ok != (tc.want != nil) {
				t.Errorf("IndexedValues(%q, %q) = %q, %t, %v; want %q", tc.index, tc.key, values, ok, err, tc.want)
			}
		}

		j, err := c.Journal()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(j.Generations, []uint64{1, 2}) || !reflect.DeepEqual(j.Entries, []int{5, 3}) || string(j.Folded) != "ns/a" {
			t.Errorf("Journal() = %+v", j)
		}
		stats, err := c.Stats()
		if err != nil {
			return err
		}
		var journal []string
		for _, s := range stats {
			if filepath.Dir(s.Bucket) == "journal" {
				journal = append(journal, s.Bucket)
				if s.KeyN == 0 {
					t.Errorf("Stats of %s count no keys", s.Bucket)
				}
			}
		}
		if want := []string{"journal/1", "journal/2"}; !reflect.DeepEqual(journal, want) {
			t.Errorf("Stats lists journal buckets %q, want %q", journal, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	records, err := inspectfile.ReadRecords(path, coll)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, want.keys) {
		t.Errorf("ReadRecords has %q, want %q", keys, want.keys)
	}
}

// TestCorruptJournalFailsReads checks that an entry that does not decode
// fails the reads that would have to apply it, with ErrCorruptRecord.
func TestCorruptJournalFailsReads(t *testing.T) {
	path := writeTreeFile(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		jb, err := tx.Bucket(format.CollectionsBucket).Bucket([]byte(coll)).CreateBucketIfNotExists(format.JournalBucket)
		if err != nil {
			return err
		}
		gb, err := jb.CreateBucket(format.JournalSeq(1))
		if err != nil {
			return err
		}
		return gb.Put(format.JournalSeq(1), []byte{0x80})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f := open(t, path)
	err = f.View(coll, func(c *inspectfile.Collection) error {
		if _, err := c.Journal(); !errors.Is(err, persist.ErrCorruptRecord) {
			t.Errorf("Journal() = %v, want ErrCorruptRecord", err)
		}
		if _, err := c.Record("ns/a"); !errors.Is(err, persist.ErrCorruptRecord) {
			t.Errorf("Record = %v, want ErrCorruptRecord", err)
		}
		if err := c.ForEachIndexEntry("app", func(string, string, []byte, error) error { return nil }); !errors.Is(err, persist.ErrCorruptRecord) {
			t.Errorf("ForEachIndexEntry = %v, want ErrCorruptRecord", err)
		}
		_, err := c.Stats() // buckets only: still readable
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Records(coll, func(string, []byte) error { return nil }); !errors.Is(err, persist.ErrCorruptRecord) {
		t.Errorf("Records = %v, want ErrCorruptRecord", err)
	}
}
