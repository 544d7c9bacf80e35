package persist_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/persist"
)

func byName(_ string, obj runtime.Object) ([]string, error) {
	return []string{obj.(interface{ GetName() string }).GetName()}, nil
}

// putNamed applies objs with their "name" index values.
func putNamed(t *testing.T, c *persist.Collection, rv string, objs ...runtime.Object) {
	t.Helper()
	ops := make([]persist.Op, len(objs))
	for i, o := range objs {
		m := o.(interface{ GetName() string })
		ops[i] = persist.Op{Key: "ns/" + m.GetName(), Object: o, Indexes: map[string][]string{"name": {m.GetName()}}}
	}
	if err := c.Apply(ops, rv); err != nil {
		t.Fatal(err)
	}
}

// collectionState describes what a collection serves: objects, an index
// lookup and its resourceVersion.
func collectionState(t *testing.T, c *persist.Collection) string {
	t.Helper()
	keys, err := c.Keys()
	if err != nil {
		t.Fatal(err)
	}
	// Keys promises no order (served from memory it has none); the state is
	// the set.
	slices.Sort(keys)
	hits, err := c.IndexKeys("name", "a")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("keys=%v index(a)=%v rv=%q", keys, hits, c.ResourceVersion())
}

// A collection opened under another provenance is emptied — objects, index
// entries, resourceVersion — and says why; under the same one it is kept.
func TestCollectionProvenanceMismatchResets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	opts := persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "web", "cluster": "one"}}
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.ResetAtOpen() != nil {
		t.Fatalf("new collection reset: %v", c.ResetAtOpen())
	}
	putNamed(t, c, "7", cm("a", "5"), cm("b", "7"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, step := range []struct {
		name       string
		provenance map[string]string
		wantReset  []string
		wantState  string
	}{
		{"same provenance", map[string]string{"list": "web", "cluster": "one"}, nil, `keys=[ns/a ns/b] index(a)=[ns/a] rv="7"`},
		{"nil checks nothing", nil, nil, `keys=[ns/a ns/b] index(a)=[ns/a] rv="7"`},
		{"other cluster", map[string]string{"list": "web", "cluster": "two"}, []string{"cluster"}, `keys=[] index(a)=[] rv=""`},
	} {
		db = openDB(t, path, persist.Options{})
		o := opts
		o.Provenance = step.provenance
		c, err := db.Collection("cms", o)
		if err != nil {
			t.Fatal(err)
		}
		var gotReset []string
		if m := c.ResetAtOpen(); m != nil {
			gotReset = m.Keys
		}
		if fmt.Sprint(gotReset) != fmt.Sprint(step.wantReset) {
			t.Errorf("%s: reset %v, want %v", step.name, gotReset, step.wantReset)
		}
		if got := collectionState(t, c); got != step.wantState {
			t.Errorf("%s: %s, want %s", step.name, got, step.wantState)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// CheckProvenance on an open collection drops what is stored and what is
// applied but not committed, and the collection keeps working.
func TestCollectionCheckProvenanceDropsPending(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if m, err := c.CheckProvenance(ctx, map[string]string{"list": "web"}); err != nil || m != nil {
		t.Fatalf("empty collection: mismatch %v, err %v; want neither", m, err)
	}
	putNamed(t, c, "3", cm("a", "3"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "4", cm("b", "4")) // applied, not committed
	if m, err := c.CheckProvenance(ctx, map[string]string{"list": "web"}); err != nil || m != nil {
		t.Fatalf("same provenance: mismatch %v, err %v; want neither", m, err)
	}
	m, err := c.CheckProvenance(ctx, map[string]string{"list": "db"})
	if err != nil || m == nil || fmt.Sprint(m.Keys) != "[list]" {
		t.Fatalf("other provenance: mismatch %v, err %v; want a mismatch on list", m, err)
	}
	if got := collectionState(t, c); got != `keys=[] index(a)=[] rv=""` {
		t.Errorf("after reset: %s", got)
	}
	putNamed(t, c, "9", cm("a", "9"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := collectionState(t, c); got != `keys=[ns/a] index(a)=[ns/a] rv="9"` {
		t.Errorf("after reset and a new write: %s", got)
	}
	if rv, err := c.CommittedResourceVersion(); err != nil || rv != "9" {
		t.Errorf("committed rv = %q, %v", rv, err)
	}
}

// Reopening a collection as the file already describes it writes nothing
// (a component opening sixty informers must not wait for sixty fsyncs);
// options that differ are written.
func TestCollectionReopenUnchangedWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	opts := persist.CollectionOptions{
		Indexes: map[string]string{"name": "1"}, IndexValues: byName,
		Provenance:  map[string]string{"list": "web", "cluster": "one"},
		Description: map[string]string{"resource": "configmaps", "namespace": "ns"},
	}
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "7", cm("a", "7"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path, persist.Options{})
	c, err = db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := collectionState(t, c); got != `keys=[ns/a] index(a)=[ns/a] rv="7"` {
		t.Errorf("reopened collection serves %s", got)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Errorf("reopening an unchanged collection wrote to the file (err %v)", err)
	}
	for name, change := range map[string]func(o *persist.CollectionOptions){
		"description": func(o *persist.CollectionOptions) { o.Description = map[string]string{"resource": "configmaps"} },
		"index":       func(o *persist.CollectionOptions) { o.Indexes = map[string]string{"name": "2"} },
	} {
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		o := opts
		change(&o)
		if c, err = db.Collection("cms", o); err != nil {
			t.Fatal(err)
		}
		if after, err := os.ReadFile(path); err != nil || bytes.Equal(before, after) {
			t.Errorf("reopening with another %s did not write it (err %v)", name, err)
		}
		if got := collectionState(t, c); got != `keys=[ns/a] index(a)=[ns/a] rv="7"` {
			t.Errorf("reopened with another %s, the collection serves %s", name, got)
		}
		opts = o
		before, _ = os.ReadFile(path)
	}
}

// An unbounded collection emptied by CheckProvenance holds every object it
// is given from then on, so a closed collection still serves them from
// memory, though nothing read it while it was open.
func TestCollectionResetKeepsAnUnboundedCacheComplete(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	putNamed(t, c, "3", cm("a", "3"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := c.CheckProvenance(ctx, map[string]string{"list": "other"}); err != nil || m == nil {
		t.Fatalf("stored collection of another provenance: mismatch %v, err %v; want a reset", m, err)
	}
	if err := c.ApplyPart([]persist.Op{{Key: "ns/b", Object: cm("b", "5"), Indexes: map[string][]string{"name": {"b"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := c.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List of the closed collection: %d objects, %v; want ns/b from memory", len(list), err)
	}
}
