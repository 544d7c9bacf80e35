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
// returns how many of them had their index entries and versions checked
// for damage, and why each was rebuilt, if it was. It closes the file.
func openCollections(t *testing.T, path string, names ...string) (checked int64, rebuilt map[string]error) {
	t.Helper()
	db := openDB(t, path, persist.Options{NoSync: true})
	rebuilt = map[string]error{}
	for _, name := range names {
		opts := twoIndexes
		opts.Provenance = map[string]string{"list": name}
		c, err := openNoPanic(db, name, opts)
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

// TestOpeningAnUnchangedCollectionChecksNoDerivedEntries: index entries
// and versions are read at open only if another writer wrote the file
// since this build's last transaction. An open after this build's own
// writes reads no tree, whatever the collection's size. After a foreign
// write, each collection is checked at its next open, even one that
// opens in a later process, and then not again.
func TestOpeningAnUnchangedCollectionChecksNoDerivedEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	writeCollections(t, path, 300, "cms", "other")

	if checked, _ := openCollections(t, path, "cms", "other"); checked != 0 {
		t.Errorf("opening two collections this build wrote last checked %d of them; want none", checked)
	}
	if checked, _ := openCollections(t, path, "cms"); checked != 0 {
		t.Errorf("opening a collection again checked %d; want none", checked)
	}

	// Another writer damages an index of "other".
	updateFile(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("other"))
		return b.Bucket(format.IndexesBucket).Bucket([]byte("name")).Bucket(format.ByValueBucket).Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
	})
	if checked, rebuilt := openCollections(t, path, "cms"); checked != 1 || len(rebuilt) != 0 {
		t.Errorf("after another writer's transaction, opening cms checked %d collections and rebuilt %v; want it checked, nothing rebuilt", checked, rebuilt)
	}
	if checked, rebuilt := openCollections(t, path, "cms", "other"); checked != 1 || rebuilt["other"] == nil {
		t.Errorf("the next process checked %d collections and rebuilt %v; want other checked and its name index rebuilt", checked, rebuilt)
	}
	if checked, rebuilt := openCollections(t, path, "cms", "other"); checked != 0 || len(rebuilt) != 0 {
		t.Errorf("once both were checked, an open checked %d and rebuilt %v; want none", checked, rebuilt)
	}
}

// BenchmarkOpenUnchangedCollection opens a collection with two indexes
// that this build wrote last, as most informer starts do.
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
