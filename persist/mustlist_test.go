package persist_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// info returns the committed description of the named collection.
func info(t *testing.T, db *persist.DB, name string) persist.CollectionInfo {
	t.Helper()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no collection %q", name)
	return persist.CollectionInfo{}
}

// The must-list mark reaches the file with the set-aside that needs it,
// survives every later write, bookmark, Close and reopen, and is cleared
// only by a list.
func TestMustListSurvivesUntilAList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	opts := persist.Options{NoSync: true, BatchInterval: time.Hour, BatchLimit: 1 << 20}
	db := openDB(t, path, opts)
	c, err := db.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "3", cm("a", "1"), cm("b", "2"), cm("c", "3"))
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	if err := c.SetAside([]persist.Op{{Key: "ns/b", Delete: true}, {Key: "ns/c", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if !c.MustList() {
		t.Fatal("MustList = false right after SetAside")
	}
	if rv := c.ResourceVersion(); rv != "3" {
		t.Errorf("SetAside changed the resourceVersion to %q, want it kept (3)", rv)
	}
	if i := info(t, db, "c"); i.MustList || i.Objects != 3 {
		t.Fatalf("before the commit the file says MustList=%v with %d objects; want neither change yet", i.MustList, i.Objects)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if i := info(t, db, "c"); !i.MustList || i.Objects != 1 {
		t.Fatalf("after one commit the file says MustList=%v with %d objects; want the mark and the set-aside together", i.MustList, i.Objects)
	}

	// A watch event and a bookmark write valid resourceVersions afterwards.
	put(t, c, "4", cm("d", "4"))
	if err := c.Apply(nil, "5"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path, opts)
	if c, err = db.Collection("c", persist.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	if !c.MustList() {
		t.Fatal("after an event, a bookmark, Close and reopen the mark is gone: the next start would resume from a file that lacks what was set aside")
	}
	if rv := c.ResourceVersion(); rv != "5" {
		t.Errorf("resourceVersion = %q, want the bookmark's 5", rv)
	}
	if keys, err := c.Keys(); err != nil || len(keys) != 2 {
		t.Errorf("keys = %v, %v; want ns/a and ns/d", keys, err)
	}

	if err := c.ApplyList([]persist.Op{{Key: "ns/b", Object: cm("b", "2")}, {Key: "ns/c", Object: cm("c", "3")}}, "6"); err != nil {
		t.Fatal(err)
	}
	if c.MustList() {
		t.Error("MustList = true after ApplyList")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path, opts)
	if i := info(t, db, "c"); i.MustList || i.ResourceVersion != "6" || i.Objects != 4 {
		t.Errorf("after the list and a reopen: MustList=%v rv=%q objects=%d; want false, 6, 4", i.MustList, i.ResourceVersion, i.Objects)
	}
}

// SetAsideAll empties the collection and marks it in one transaction;
// emptying it for another provenance clears the mark with the rest.
func TestSetAsideAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{NoSync: true})
	c, err := db.Collection("c", persist.CollectionOptions{Provenance: map[string]string{"list": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "3", cm("a", "1"), cm("b", "2"))
	if err := c.SetAsideAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if i := info(t, db, "c"); !i.MustList || i.Objects != 0 || i.ResourceVersion != "" {
		t.Errorf("after SetAsideAll the file says MustList=%v objects=%d rv=%q; want true, 0, none", i.MustList, i.Objects, i.ResourceVersion)
	}
	if got := c.Provenance()["list"]; got != "x" {
		t.Errorf("SetAsideAll dropped the provenance: list=%q", got)
	}
	put(t, c, "4", cm("d", "4"))
	if _, err := c.CheckProvenance(context.Background(), map[string]string{"list": "y"}); err != nil {
		t.Fatal(err)
	}
	if c.MustList() {
		t.Error("MustList = true on a collection emptied for another provenance")
	}
	if i := info(t, db, "c"); i.MustList {
		t.Error("the file keeps the mark after the collection was emptied")
	}
}

// SetAsideUnreadable deletes only the records that still do not decode.
// A key written or deleted since the caller found it unreadable is kept as
// it is now, and the must-list mark is set only if a key was deleted.
func TestSetAsideUnreadableKeepsKeysWrittenSince(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rewrite     bool // rewrite ns/a before the set-aside
		wantDropped []string
	}{
		{"one rewritten", false, []string{"ns/a"}},
		{"all rewritten", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			db := openDB(t, path, persist.Options{NoSync: true})
			c, err := db.Collection("c", persist.CollectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			put(t, c, "3", cm("a", "1"), cm("b", "2"), cm("c", "3"))
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			updateFile(t, path, func(tx *bolt.Tx) error {
				objects := tx.Bucket(format.CollectionsBucket).Bucket([]byte("c")).Bucket(format.ObjectsBucket)
				for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
					if err := objects.Put([]byte(key), []byte("not a record")); err != nil {
						return err
					}
				}
				return nil
			})
			db = openDB(t, path, persist.Options{NoSync: true})
			c, err = db.Collection("c", persist.CollectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			put(t, c, "4", cm("b", "4"))
			if err := c.Apply([]persist.Op{{Key: "ns/c", Delete: true}}, "5"); err != nil {
				t.Fatal(err)
			}
			if tc.rewrite {
				put(t, c, "6", cm("a", "6"))
			}
			dropped, err := c.SetAsideUnreadable([]string{"ns/a", "ns/b", "ns/c"})
			if err != nil || !slices.Equal(dropped, tc.wantDropped) {
				t.Fatalf("SetAsideUnreadable = %v, %v; want %v", dropped, err, tc.wantDropped)
			}
			if got := c.MustList(); got != (len(tc.wantDropped) > 0) {
				t.Errorf("MustList() = %v after dropping %v", got, dropped)
			}
			want := map[string]string{"ns/b": "4"}
			if tc.rewrite {
				want["ns/a"] = "6"
			}
			got := map[string]string{}
			objs, err := c.List()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				m := o.(*corev1.ConfigMap)
				got[m.Namespace+"/"+m.Name] = m.ResourceVersion
			}
			if !maps.Equal(got, want) {
				t.Errorf("after the set-aside the collection holds %v; want %v", got, want)
			}
		})
	}
}
