package persist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// twoIndexes indexes configmaps by name and by namespace.
var twoIndexes = persist.CollectionOptions{
	Indexes: map[string]string{"name": "1", "namespace": "1"},
	IndexValues: func(index string, obj runtime.Object) ([]string, error) {
		m := obj.(metav1.Object)
		if index == "name" {
			return []string{m.GetName()}, nil
		}
		return []string{m.GetNamespace()}, nil
	},
}

// listOfConfigMaps returns n configmaps spread over 100 namespaces, with
// their index values for twoIndexes.
func listOfConfigMaps(n int) []persist.Op {
	ops := make([]persist.Op, n)
	for i := range ops {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("cm%d", i),
			UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: fmt.Sprint(i + 1),
		}}
		ops[i] = persist.Op{Key: o.Namespace + "/" + o.Name, Object: o, Indexes: map[string][]string{"name": {o.Name}, "namespace": {o.Namespace}}}
	}
	return ops
}

// writeCollections writes n configmaps into each named collection of a
// new file at path, and closes it.
func writeCollections(t testing.TB, path string, n int, names ...string) {
	t.Helper()
	db, err := persist.Open(path, persist.Options{NoSync: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range names {
		opts := twoIndexes
		opts.Provenance = map[string]string{"list": name}
		c, err := db.Collection(name, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyList(listOfConfigMaps(n), fmt.Sprint(n+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// openCollections opens the file at path and the named collections, and
// returns how many checks of index entries and versions for damage ran,
// and why each collection was rebuilt, if it was. It closes the file.
func openCollections(t *testing.T, path string, opts persist.Options, names ...string) (checked int64, rebuilt map[string]error) {
	t.Helper()
	opts.NoSync = true
	db := openDB(t, path, opts)
	rebuilt = map[string]error{}
	for _, name := range names {
		copts := twoIndexes
		copts.Provenance = map[string]string{"list": name}
		if opts.ReadOnly {
			copts.Provenance = nil // a read-only open records nothing
		}
		c, err := openNoPanic(db, name, copts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RebuiltAtOpen(); err != nil {
			rebuilt[name] = err
		}
	}
	checked = persist.DerivedChecksForTest(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return checked, rebuilt
}

// TestEveryWritableOpenChecksDerivedEntries: damage need not come from a
// transaction, so no record of who wrote the file last can tell an open
// that its index entries and versions are sound. Every writable open of a
// collection checks them, once on the path most opens take, and a
// read-only open checks nothing. Damage another writer made is rebuilt at
// the next open, and the open after finds nothing to rebuild.
func TestEveryWritableOpenChecksDerivedEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	writeCollections(t, path, 300, "cms", "other")

	if checked, rebuilt := openCollections(t, path, persist.Options{}, "cms", "other"); checked != 2 || len(rebuilt) != 0 {
		t.Errorf("opening two unchanged collections checked %d times and rebuilt %v; want each checked once, nothing rebuilt", checked, rebuilt)
	}
	if checked, _ := openCollections(t, path, persist.Options{ReadOnly: true}, "cms", "other"); checked != 0 {
		t.Errorf("a read-only open checked %d times; want none, since it cannot rebuild", checked)
	}

	// Another writer damages an index of "other".
	updateFile(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("other"))
		return b.Bucket(format.IndexesBucket).Bucket([]byte("name")).Bucket(format.ByValueBucket).Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
	})
	if _, rebuilt := openCollections(t, path, persist.Options{}, "cms"); len(rebuilt) != 0 {
		t.Errorf("opening cms after damage to other rebuilt %v; want nothing rebuilt", rebuilt)
	}
	if _, rebuilt := openCollections(t, path, persist.Options{}, "cms", "other"); len(rebuilt) != 1 || rebuilt["other"] == nil {
		t.Errorf("opening both rebuilt %v; want other's name index rebuilt", rebuilt)
	}
	if checked, rebuilt := openCollections(t, path, persist.Options{}, "cms", "other"); checked != 2 || len(rebuilt) != 0 {
		t.Errorf("once rebuilt, an open checked %d times and rebuilt %v; want each checked once, nothing rebuilt", checked, rebuilt)
	}
}

// BenchmarkOpenUnchangedCollection opens an unchanged collection with two
// indexes, as most informer starts do. The open checks every index entry
// and version for damage. A bounded and an unbounded collection open
// alike, since an unbounded one loads its indexes into memory at its first
// full read, not at open.
func BenchmarkOpenUnchangedCollection(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "cache.db")
			writeCollections(b, path, n, "cms")
			db, err := persist.Open(path, persist.Options{NoSync: true, Scheme: scheme.Scheme})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			opts := twoIndexes
			opts.Provenance = map[string]string{"list": "cms"}
			opts.CacheObjects = 100
			ctx := context.Background()
			for b.Loop() {
				c, err := db.Collection("cms", opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
