package persist_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/persist"
)

// After Collection.Close, every exported method that needs the file, or
// writes, fails with ErrClosed. Another instance may have opened the
// collection since and changed the file, as here. A closed instance that
// read it would merge that state with its own stale layers. One that wrote
// it would change a collection another instance owns. The methods left
// out answer from memory, as their docs say: Name, DB, Indexes,
// ResourceVersion, MustList, Provenance, ResetAtOpen, JournalSetAside,
// DamageSetAside, DroppedCheckpoints and CacheStats. A second Close
// returns nil.
func TestClosedCollectionRefusesTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.WithJournalBytes(persist.Options{}, 1))
	opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName}
	old, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, old, "1", cm("a", "1"), cm("b", "1"))
	oldCP, err := old.Checkpoint("kept-open")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, oldCP, "ns/a", "1")
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}

	// The newer instance changes objects, indexes and a checkpoint.
	newer, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, newer, "2", cm("b", "2"), cm("c", "2"))
	cp, err := newer.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/c", "2")
	cp.Close()
	if err := newer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	for name, call := range closedCalls(old, oldCP) {
		if err := call(); !errors.Is(err, persist.ErrClosed) {
			t.Errorf("%s on the closed collection = %v, want ErrClosed", name, err)
		}
	}
	if d := oldCP.Deleted(); d != nil {
		t.Errorf("Checkpoint.Deleted of the closed collection = %v, want nil", d)
	}

	// Nothing the closed instance was asked to do reached the file.
	if acks, err := newer.CheckpointAcks("handler"); err != nil || len(acks) != 1 || acks["ns/c"] != "2" {
		t.Errorf("the newer instance's checkpoint holds %v, %v; want ns/c at 2", acks, err)
	}
	if rv, err := newer.CommittedResourceVersion(); err != nil || rv != "2" {
		t.Errorf("committed resourceVersion %q, %v; want 2", rv, err)
	}
	if keys, err := newer.IndexKeys("name", "c"); err != nil || len(keys) != 1 {
		t.Errorf("the newer instance's index serves %v, %v", keys, err)
	}
	if _, err := newer.IndexKeys("name2", "c"); err == nil {
		t.Error("the closed instance added an index to the newer one's collection")
	}
}

// After Checkpoint.Close, its writes and its reads of the file fail with
// ErrClosed, and Deleted returns nil. Another consumer may have opened the
// same name since and acknowledged more. Acked, Len, Tombstones and
// Overflows answer from what the checkpoint held when it closed.
func TestClosedCheckpointRefusesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "1", cm("a", "1"), cm("b", "1"))
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/a", "1")
	ack(t, cp, "ns/b", "1")
	if err := c.Apply([]persist.Op{{Key: "ns/b", Delete: true, DeletedAt: "2"}}, "2"); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	cp.Close() // a second Close does nothing
	for name, call := range map[string]func() error{
		"Ack":        func() error { return cp.Ack("ns/a", "1") },
		"AckDeleted": func() error { return cp.AckDeleted("ns/b") },
		"Clear":      cp.Clear,
		"Unacknowledged": func() error {
			_, _, err := cp.Unacknowledged()
			return err
		},
	} {
		if err := call(); !errors.Is(err, persist.ErrClosed) {
			t.Errorf("%s on the closed checkpoint = %v, want ErrClosed", name, err)
		}
	}
	if d := cp.Deleted(); d != nil {
		t.Errorf("Deleted of the closed checkpoint = %v, want nil", d)
	}
	if rv, ok := cp.Acked("ns/a"); !ok || rv != "1" || cp.Len() != 1 || cp.Tombstones() != 1 {
		t.Errorf("the closed checkpoint holds a at %q (%t), %d acknowledgements and %d tombstones; want a at 1, 1 and 1", rv, ok, cp.Len(), cp.Tombstones())
	}
}

// closedCalls returns a call of every exported method of old and oldCP
// that must fail with ErrClosed once old, or its DB, is closed.
func closedCalls(old *persist.Collection, oldCP *persist.Checkpoint) map[string]func() error {
	ctx := context.Background()
	op := []persist.Op{{Key: "ns/d", Object: cm("d", "3"), Indexes: map[string][]string{"name": {"d"}}}}
	byNameVersioned := func(index string, obj runtime.Object) ([]string, error) { return byName(index, obj) }
	return map[string]func() error{
		"Apply":                    func() error { return old.Apply(op, "3") },
		"ApplyList":                func() error { return old.ApplyList(op, "3") },
		"ApplyPart":                func() error { return old.ApplyPart(op) },
		"SetAside":                 func() error { return old.SetAside([]persist.Op{{Key: "ns/b", Delete: true}}) },
		"SetAsideAll":              func() error { return old.SetAsideAll(ctx) },
		"Reset":                    func() error { return old.Reset(ctx, nil) },
		"CheckProvenance":          func() error { _, err := old.CheckProvenance(ctx, map[string]string{"other": "list"}); return err },
		"AddIndexes":               func() error { return old.AddIndexes(ctx, map[string]string{"name2": "1"}, byNameVersioned) },
		"Flush":                    func() error { return old.Flush(ctx) },
		"Checkpoint":               func() error { _, err := old.Checkpoint("handler"); return err },
		"Checkpoints":              func() error { _, err := old.Checkpoints(); return err },
		"CheckpointAcks":           func() error { _, err := old.CheckpointAcks("handler"); return err },
		"CommittedResourceVersion": func() error { _, err := old.CommittedResourceVersion(); return err },
		"StoredIndexValues":        func() error { _, err := old.StoredIndexValues([]string{"ns/b", "ns/c"}); return err },
		"Get":                      func() error { _, _, err := old.Get("ns/c"); return err },
		"GetMany":                  func() error { _, err := old.GetMany([]string{"ns/b", "ns/c"}); return err },
		"List":                     func() error { _, err := old.List(); return err },
		"AppendList":               func() error { _, err := old.AppendList(nil); return err },
		"Keys":                     func() error { _, err := old.Keys(); return err },
		"Len":                      func() error { _, err := old.Len(); return err },
		"ForEach":                  func() error { return old.ForEach(func(string, runtime.Object) error { return nil }) },
		"ResourceVersions":         func() error { _, err := old.ResourceVersions(); return err },
		"Versions":                 func() error { _, err := old.Versions(); return err },
		"IndexKeys":                func() error { _, err := old.IndexKeys("name", "c"); return err },
		"ByIndex":                  func() error { _, err := old.ByIndex("name", "c"); return err },
		"AppendByIndex":            func() error { _, err := old.AppendByIndex(nil, "name", "c"); return err },
		"IndexValues":              func() error { _, err := old.IndexValues("name"); return err },
		"Checkpoint.Ack":           func() error { return oldCP.Ack("ns/b", "1") },
		"Checkpoint.AckDeleted":    func() error { return oldCP.AckDeleted("ns/b") },
		"Checkpoint.Clear":         func() error { return oldCP.Clear() },
		"Checkpoint.Unacknowledged": func() error {
			_, _, err := oldCP.Unacknowledged()
			return err
		},
	}
}

// The collections of a closed DB refuse the same methods with ErrClosed.
// Their checkpoints' Deleted returns nil.
func TestCollectionOfAClosedDBRefusesTheFile(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName})
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "1", cm("a", "1"), cm("b", "1"))
	cp, err := c.Checkpoint("kept-open")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/b", "1")
	if err := c.Apply([]persist.Op{{Key: "ns/b", Delete: true}}, "2"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range closedCalls(c, cp) {
		if err := call(); !errors.Is(err, persist.ErrClosed) {
			t.Errorf("%s on a collection of the closed DB = %v, want ErrClosed", name, err)
		}
	}
	if d := cp.Deleted(); d != nil {
		t.Errorf("Checkpoint.Deleted on a collection of the closed DB = %v, want nil", d)
	}
}
