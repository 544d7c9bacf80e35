package persist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// checkpointFile is a cache file with one collection, reopened at will.
type checkpointFile struct {
	t    *testing.T
	path string
	db   *persist.DB
	c    *persist.Collection
	prov map[string]string
}

func newCheckpointFile(t *testing.T) *checkpointFile {
	f := &checkpointFile{t: t, path: filepath.Join(t.TempDir(), "cache.db"), prov: map[string]string{"cluster": "one"}}
	f.reopen()
	return f
}

func (f *checkpointFile) reopen() {
	f.t.Helper()
	if f.db != nil {
		if err := f.db.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	f.db = openDB(f.t, f.path, persist.Options{})
	var err error
	if f.c, err = f.db.Collection("cms", persist.CollectionOptions{Provenance: f.prov}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *checkpointFile) checkpoint(name string) *persist.Checkpoint {
	f.t.Helper()
	cp, err := f.c.Checkpoint(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return cp
}

func (f *checkpointFile) stored(name string) map[string]string {
	f.t.Helper()
	acks, err := f.c.CheckpointAcks(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return acks
}

func ack(t *testing.T, cp *persist.Checkpoint, key, rv string) {
	t.Helper()
	if err := cp.Ack(key, rv); err != nil {
		t.Fatal(err)
	}
}

// Acknowledgements reach the file with the group commit, and the next
// process reads them back. Only those of stored keys are kept. A deletion
// drops the key's acknowledgements in every checkpoint.
func TestCheckpointAcksPersistForStoredKeysOnly(t *testing.T) {
	f := newCheckpointFile(t)
	put(t, f.c, "3", cm("a", "1"), cm("b", "2"), cm("c", "3"))
	cp, other := f.checkpoint("handler"), f.checkpoint("other")
	ack(t, cp, "ns/a", "1")
	ack(t, cp, "ns/b", "2")
	ack(t, other, "ns/b", "2")
	ack(t, cp, "ns/gone", "9") // never stored
	if rv, ok := cp.Acked("ns/a"); !ok || rv != "1" {
		t.Errorf("Acked(ns/a) before the commit = %q %v, want 1", rv, ok)
	}
	f.reopen()
	cp = f.checkpoint("handler")
	if got, want := f.stored("handler"), map[string]string{"ns/a": "1", "ns/b": "2"}; !maps.Equal(got, want) {
		t.Errorf("stored acknowledgements = %v, want %v", got, want)
	}
	if rv, ok := cp.Acked("ns/b"); !ok || rv != "2" || cp.Len() != 2 {
		t.Errorf("after reopening Acked(ns/b) = %q %v, Len = %d", rv, ok, cp.Len())
	}

	// Deleting b drops its acknowledgement in both checkpoints, the open one
	// and the one nobody opened; acknowledging c and deleting it in the
	// same commit stores nothing for c.
	ack(t, cp, "ns/c", "3")
	if err := f.c.Apply([]persist.Op{{Key: "ns/b", Delete: true}, {Key: "ns/c", Delete: true}}, "4"); err != nil {
		t.Fatal(err)
	}
	if _, ok := cp.Acked("ns/b"); ok {
		t.Error("a deleted key is still acknowledged in memory")
	}
	f.reopen()
	if got, want := f.stored("handler"), map[string]string{"ns/a": "1"}; !maps.Equal(got, want) {
		t.Errorf("after deletions, handler's acknowledgements = %v, want %v", got, want)
	}
	if got := f.stored("other"); len(got) != 0 {
		t.Errorf("after deletions, other's acknowledgements = %v, want none", got)
	}
	names, err := f.c.Checkpoints()
	if err != nil || len(names) != 2 {
		t.Errorf("Checkpoints() = %v %v, want handler and other", names, err)
	}

	// The deletions of acknowledged keys left tombstones with the last
	// state, until the deletion (or a new state of the key) is
	// acknowledged.
	tombstones := func(name string) []string {
		t.Helper()
		keys, err := f.c.CheckpointTombstones(name)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		return keys
	}
	if got := tombstones("handler"); !slices.Equal(got, []string{"ns/b", "ns/c"}) {
		t.Errorf("handler's tombstones = %v, want ns/b ns/c", got)
	}
	if got := tombstones("other"); !slices.Equal(got, []string{"ns/b"}) {
		t.Errorf("other's tombstones = %v, want ns/b", got)
	}
	cp = f.checkpoint("handler")
	if d := cp.Deleted(); len(d) != 2 || d["ns/b"] == nil {
		t.Errorf("Deleted() = %v, want ns/b and ns/c with their last state", d)
	} else if rv := d["ns/b"].(*corev1.ConfigMap).ResourceVersion; rv != "2" {
		t.Errorf("tombstone of ns/b carries resourceVersion %q, want 2", rv)
	}
	if err := cp.AckDeleted("ns/b"); err != nil {
		t.Fatal(err)
	}
	put(t, f.c, "5", cm("c", "5")) // c comes back
	ack(t, cp, "ns/c", "5")        // settles its deletion too
	f.reopen()
	if got := tombstones("handler"); len(got) != 0 {
		t.Errorf("handler's tombstones after AckDeleted and Ack = %v, want none", got)
	}
}

// A collection that starts over (another provenance, or a Reset) drops every
// checkpoint with its objects: the acknowledgements name states of objects
// that are gone.
func TestCheckpointsDroppedWithTheCollection(t *testing.T) {
	for name, reset := range map[string]func(f *checkpointFile){
		"another provenance at open": func(f *checkpointFile) {
			f.prov = map[string]string{"cluster": "two"}
			f.reopen()
		},
		"CheckProvenance": func(f *checkpointFile) {
			if _, err := f.c.CheckProvenance(context.Background(), map[string]string{"cluster": "two"}); err != nil {
				f.t.Fatal(err)
			}
		},
		"Reset": func(f *checkpointFile) {
			if err := f.c.Reset(context.Background(), f.prov); err != nil {
				f.t.Fatal(err)
			}
		},
		"SetAsideAll": func(f *checkpointFile) {
			if err := f.c.SetAsideAll(context.Background()); err != nil {
				f.t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCheckpointFile(t)
			put(t, f.c, "1", cm("a", "1"), cm("b", "1"))
			cp := f.checkpoint("handler")
			ack(t, cp, "ns/a", "1")
			ack(t, cp, "ns/b", "1")
			if err := f.c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			// b is deleted and the handler has not acknowledged the
			// deletion: a tombstone.
			if err := f.c.Apply([]persist.Op{{Key: "ns/b", Delete: true, DeletedAt: "2"}}, "2"); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if cp.Tombstones() != 1 {
				t.Fatalf("%d tombstones before the reset, want b's", cp.Tombstones())
			}
			reset(f)
			// The object comes back at the same resourceVersion, as a relist
			// of the same cluster could bring it: the acknowledgement must
			// still be gone.
			put(t, f.c, "1", cm("a", "1"))
			if err := f.c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := f.stored("handler"); len(got) != 0 {
				t.Errorf("stored acknowledgements after the reset = %v, want none", got)
			}
			if rv, ok := cp.Acked("ns/a"); ok && name != "another provenance at open" {
				t.Errorf("the open checkpoint still acknowledges ns/a at %q after the reset", rv)
			}
			// The deletion it had not handled goes with the collection: a
			// cold start tells no handler of deletions, as client-go's
			// does not.
			if keys, err := f.c.CheckpointTombstones("handler"); err != nil || len(keys) != 0 {
				t.Errorf("stored tombstones after the reset = %v %v, want none", keys, err)
			}
			if name != "another provenance at open" && cp.Tombstones() != 0 {
				t.Errorf("the open checkpoint still holds %d tombstones after the reset", cp.Tombstones())
			}
		})
	}
}

// Clear drops a checkpoint's acknowledgements (those made after it are
// kept); a name is open once at a time; Ack on a closed checkpoint fails.
func TestCheckpointClearAndClose(t *testing.T) {
	f := newCheckpointFile(t)
	put(t, f.c, "2", cm("a", "1"), cm("b", "2"))
	cp := f.checkpoint("handler")
	ack(t, cp, "ns/a", "1")
	if err := f.c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Checkpoint("handler"); !errors.Is(err, persist.ErrCheckpointOpen) {
		t.Errorf("opening an open checkpoint: %v, want ErrCheckpointOpen", err)
	}
	if err := cp.Clear(); err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/b", "2")
	if _, ok := cp.Acked("ns/a"); ok {
		t.Error("Acked(ns/a) after Clear")
	}
	// Closed and opened again before the commit: the clear and the later
	// acknowledgement are still pending, and the reopened checkpoint sees
	// them rather than the stale file.
	cp.Close()
	if err := cp.Ack("ns/a", "1"); !errors.Is(err, persist.ErrClosed) {
		t.Errorf("Ack after Close: %v, want ErrClosed", err)
	}
	cp = f.checkpoint("handler")
	if _, ok := cp.Acked("ns/a"); ok {
		t.Error("a checkpoint reopened before its Clear was committed acknowledges ns/a")
	}
	if rv, _ := cp.Acked("ns/b"); rv != "2" {
		t.Errorf("a checkpoint reopened before its commit: Acked(ns/b) = %q, want 2", rv)
	}
	f.reopen()
	if got, want := f.stored("handler"), map[string]string{"ns/b": "2"}; !maps.Equal(got, want) {
		t.Errorf("stored after Clear = %v, want %v", got, want)
	}
}

// A checkpoint may open while a deletion of a key it acknowledged is
// applied but not committed. It then holds the tombstone with the last
// state, as it will be on disk after the commit.
func TestCheckpointOpenedBeforeADeletionIsCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{BatchInterval: time.Hour, BatchLimit: 1 << 20})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "2", cm("a", "1"), cm("b", "2"))
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/a", "1")
	ack(t, cp, "ns/b", "2")
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	if err := c.Apply([]persist.Op{{Key: "ns/b", Delete: true}}, "3"); err != nil {
		t.Fatal(err)
	}
	cp, err = c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	d := cp.Deleted()
	if len(d) != 1 || d["ns/b"] == nil || d["ns/b"].(*corev1.ConfigMap).ResourceVersion != "2" {
		t.Errorf("Deleted() = %v, want ns/b at resourceVersion 2", d)
	}
	if _, ok := cp.Acked("ns/b"); ok {
		t.Error("the deleted key is still acknowledged")
	}
	if rv, _ := cp.Acked("ns/a"); rv != "1" {
		t.Errorf("Acked(ns/a) = %q, want 1", rv)
	}
}

// Unacknowledged gives what the consumer still has to process: objects not
// acknowledged at their stored resourceVersion, in the file or not
// committed yet, without decoding the acknowledged ones.
func TestCheckpointUnacknowledgedDecodesOnlyThem(t *testing.T) {
	f := newCheckpointFile(t)
	put(t, f.c, "4", cm("a", "1"), cm("b", "2"), cm("c", "3"), cm("d", "4"))
	cp := f.checkpoint("handler")
	ack(t, cp, "ns/a", "1")
	ack(t, cp, "ns/b", "1") // an older state of b
	ack(t, cp, "ns/c", "3")
	ack(t, cp, "ns/d", "4")
	f.reopen()
	cp = f.checkpoint("handler")
	put(t, f.c, "6", cm("d", "5"), cm("e", "6")) // not committed yet: d changed, e new
	ack(t, cp, "ns/e", "6")

	objs, acknowledged, err := cp.Unacknowledged()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		m := o.(*corev1.ConfigMap)
		got = append(got, m.Name+"@"+m.ResourceVersion)
	}
	slices.Sort(got)
	if want := []string{"b@2", "d@5"}; !slices.Equal(got, want) || acknowledged != 3 {
		t.Errorf("Unacknowledged() = %v, %d acknowledged; want %v, 3 (a, c, e)", got, acknowledged, want)
	}
	// Cached: d and e, which Apply cached, and b, decoded from the file;
	// not a or c.
	if n := f.c.CacheStats().Objects; n != 3 {
		t.Errorf("%d objects decoded and cached, want 3: the acknowledged ones are not decoded", n)
	}

	// Once everything is decoded the answer comes from memory, and is the
	// same.
	if _, err := f.c.List(); err != nil {
		t.Fatal(err)
	}
	objs, acknowledged, err = cp.Unacknowledged()
	if err != nil || len(objs) != 2 || acknowledged != 3 {
		t.Errorf("from memory: Unacknowledged() = %d objects, %d acknowledged, %v; want 2, 3", len(objs), acknowledged, err)
	}
}

// An acknowledgement never settles a state newer than the one it names. A
// consumer may still be finishing an update when the object is deleted. It
// acknowledges that update after the deletion was applied, in the same
// group commit or a later one. The deletion must still be delivered after a
// restart, until the deletion itself is acknowledged. AckDeleted does that,
// and so does Ack at the version the deletion was delivered at.
func TestLateAckDoesNotSettleADeletion(t *testing.T) {
	del := func(t *testing.T, f *checkpointFile, deletedAt string) {
		t.Helper()
		if err := f.c.Apply([]persist.Op{{Key: "ns/a", Delete: true, DeletedAt: deletedAt}}, "3"); err != nil {
			t.Fatal(err)
		}
	}
	flush := func(t *testing.T, f *checkpointFile) {
		t.Helper()
		if err := f.c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		deletedAt string // "" for a deletion found by a relist
		committed bool   // the deletion is committed before the late ack
		settle    func(cp *persist.Checkpoint) error
	}{
		{"watch deletion committed, then Ack of the deletion", "3", true, func(cp *persist.Checkpoint) error { return cp.Ack("ns/a", "3") }},
		{"watch deletion in the same commit, then AckDeleted", "3", false, func(cp *persist.Checkpoint) error { return cp.AckDeleted("ns/a") }},
		{"relist deletion committed, then AckDeleted", "", true, func(cp *persist.Checkpoint) error { return cp.AckDeleted("ns/a") }},
		{"relist deletion in the same commit, then AckDeleted", "", false, func(cp *persist.Checkpoint) error { return cp.AckDeleted("ns/a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCheckpointFile(t)
			put(t, f.c, "1", cm("a", "1"), cm("b", "1"))
			cp := f.checkpoint("handler")
			ack(t, cp, "ns/a", "1")
			flush(t, f)
			put(t, f.c, "2", cm("a", "2")) // the handler starts on this update
			del(t, f, tc.deletedAt)
			if tc.committed {
				flush(t, f)
			}
			// The handler finishes the update: late.
			ack(t, cp, "ns/a", "2")
			ack(t, cp, "ns/a", "1")
			if cp.Tombstones() != 1 {
				t.Errorf("after the late acknowledgements, %d tombstones in memory, want 1", cp.Tombstones())
			}
			cp.Close()
			f.reopen() // a crash would lose no more: the acks were committed or dropped
			cp = f.checkpoint("handler")
			d := cp.Deleted()
			if obj, ok := d["ns/a"]; !ok || obj == nil {
				t.Fatalf("after a restart Deleted() = %v, want ns/a with its last state: the deletion was lost", d)
			} else if name := obj.(*corev1.ConfigMap).Name; name != "a" {
				t.Errorf("tombstone carries %q, want a's last committed state", name)
			}
			if _, ok := cp.Acked("ns/a"); ok {
				t.Error("a deleted key is acknowledged after the restart")
			}
			// A late ack after the restart settles nothing either.
			ack(t, cp, "ns/a", "2")
			flush(t, f)
			if keys, err := f.c.CheckpointTombstones("handler"); err != nil || !slices.Equal(keys, []string{"ns/a"}) {
				t.Errorf("committed tombstones after another late ack = %v %v, want ns/a", keys, err)
			}
			if err := tc.settle(cp); err != nil {
				t.Fatal(err)
			}
			cp.Close()
			f.reopen()
			cp = f.checkpoint("handler")
			if d := cp.Deleted(); len(d) != 0 {
				t.Errorf("after acknowledging the deletion, Deleted() = %v, want none", d)
			}
		})
	}
}

// An object created, acknowledged and deleted between two group commits
// has no committed state; its deletion must still leave a tombstone: the
// consumer processed it.
func TestTombstoneOfAnObjectNeverCommitted(t *testing.T) {
	f := newCheckpointFile(t)
	cp := f.checkpoint("handler")
	put(t, f.c, "1", cm("a", "1"))
	ack(t, cp, "ns/a", "1")
	if err := f.c.Apply([]persist.Op{{Key: "ns/a", Delete: true, DeletedAt: "2"}}, "2"); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	f.reopen()
	cp = f.checkpoint("handler")
	if d := cp.Deleted(); d["ns/a"] == nil {
		t.Errorf("Deleted() after a restart = %v, want ns/a with its state", d)
	}
}

// An informer sets aside a record that a warm start cannot read back. If
// the record was acknowledged, that leaves a tombstone the next start can
// open. The tombstone is an empty object of the record's type with its
// name, not the unreadable bytes. The same holds for a record in the
// journal.
func TestSetAsideUnreadableAcknowledgedRecord(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(fmt.Sprintf("journaled=%v", journaled), func(t *testing.T) {
			f := newCheckpointFile(t)
			put(t, f.c, "1", cm("a", "1"), cm("b", "1"))
			if err := f.c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if journaled {
				put(t, f.c, "2", cm("a", "2"))
			}
			cp := f.checkpoint("handler")
			ack(t, cp, "ns/a", map[bool]string{false: "1", true: "2"}[journaled])
			cp.Close()
			if err := f.db.Close(); err != nil {
				t.Fatal(err)
			}
			f.db = nil
			corruptPayload(t, f.path, "cms", "ns/a", journaled)
			f.reopen()
			if _, _, err := f.c.Get("ns/a"); !errors.Is(err, persist.ErrCorruptRecord) {
				t.Fatalf("Get of the damaged record = %v, want ErrCorruptRecord", err)
			}
			cp = f.checkpoint("handler")
			if err := f.c.SetAside([]persist.Op{{Key: "ns/a", Delete: true}}); err != nil {
				t.Fatal(err)
			}
			cp.Close()
			f.reopen()
			cp, err := f.c.Checkpoint("handler")
			if err != nil {
				t.Fatalf("the checkpoint cannot be opened after the set-aside: %v", err)
			}
			d := cp.Deleted()
			obj, ok := d["ns/a"]
			if !ok {
				t.Fatalf("Deleted() = %v, want a's deletion", d)
			}
			if c, isCM := obj.(*corev1.ConfigMap); !isCM || c.Name != "a" || c.Namespace != "ns" {
				t.Errorf("a's tombstone = %#v, want an empty ConfigMap ns/a", obj)
			}
		})
	}
}

// corruptPayload damages the payload of key's record, keeping its header,
// in the object tree or (journaled) in the journal's newest entry for key.
func corruptPayload(t *testing.T, path, coll, key string, journaled bool) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	damage := func(rec []byte) []byte {
		out := bytes.Clone(rec)
		for i := len(out) - 8; i < len(out); i++ {
			out[i] = 0xff
		}
		return out
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("collections")).Bucket([]byte(coll))
		if !journaled {
			return b.Bucket([]byte("objects")).Put([]byte(key), damage(b.Bucket([]byte("objects")).Get([]byte(key))))
		}
		var gen, seq []byte
		var raw []byte
		jb := b.Bucket(format.JournalBucket)
		err := jb.ForEachBucket(func(g []byte) error {
			return jb.Bucket(g).ForEach(func(s, v []byte) error {
				if e, err := format.DecodeJournalEntry(v); err == nil && e.Key == key {
					gen, seq, raw = bytes.Clone(g), bytes.Clone(s), bytes.Clone(v)
				}
				return nil
			})
		})
		if err != nil || raw == nil {
			return fmt.Errorf("no journal entry for %s: %v", key, err)
		}
		return jb.Bucket(gen).Put(seq, damage(raw))
	}); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint nobody has opened for Options.CheckpointRetention is dropped,
// with its acknowledgements and tombstones. That happens when its
// collection is next opened for writing. A checkpoint in use is not
// dropped, however long its process runs.
func TestAbandonedCheckpointIsDropped(t *testing.T) {
	var nowSecs atomic.Int64 // read by the commit goroutine
	nowSecs.Store(1_700_000_000)
	clock := func() time.Time { return time.Unix(nowSecs.Load(), 0) }
	path := filepath.Join(t.TempDir(), "cache.db")
	var db *persist.DB
	var c *persist.Collection
	open := func() {
		t.Helper()
		if db != nil {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		db = openDB(t, path, persist.WithClock(persist.Options{CheckpointRetention: 7 * 24 * time.Hour}, clock))
		var err error
		if c, err = db.Collection("cms", persist.CollectionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	open()
	put(t, c, "1", cm("a", "1"), cm("b", "1"))
	for _, name := range []string{"renamed", "current", "long-running"} {
		cp, err := c.Checkpoint(name)
		if err != nil {
			t.Fatal(err)
		}
		ack(t, cp, "ns/a", "1")
		if name != "long-running" {
			cp.Close()
		}
	}
	if err := c.Apply([]persist.Op{{Key: "ns/a", Delete: true, DeletedAt: "2"}}, "2"); err != nil { // tombstones
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Eight days: "long-running" stays open, its process committing now and then.
	for hour := range 8 * 24 {
		nowSecs.Add(3600)
		put(t, c, "2", cm("b", "1"))
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if hour == 2*24 {
			cp, err := c.Checkpoint("current") // its consumer starts again
			if err != nil {
				t.Fatal(err)
			}
			cp.Close()
		}
	}
	open()
	if got := c.DroppedCheckpoints(); !slices.Equal(got, []string{"renamed"}) {
		t.Errorf("DroppedCheckpoints() = %v, want [renamed]", got)
	}
	names, err := c.Checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"current", "long-running"}) {
		t.Errorf("checkpoints left = %v, want current and long-running", names)
	}
	if keys, err := c.CheckpointTombstones("renamed"); err != nil || len(keys) != 0 {
		t.Errorf("the dropped checkpoint's tombstones = %v %v, want none", keys, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A consumer that never acknowledges deletions gathers a tombstone per
// deleted object it acknowledged. Past Options.MaxTombstones, its
// checkpoint is cleared rather than grow for as long as the file lives.
// As after a cold start, everything is processed again and no deletion is
// told.
func TestTombstonesAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{MaxTombstones: 3})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []*corev1.ConfigMap
	for i := range 6 {
		objs = append(objs, cm(fmt.Sprintf("cm-%d", i), "1"))
	}
	put(t, c, "1", objs...)
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		ack(t, cp, fmt.Sprintf("ns/cm-%d", i), "1")
	}
	for i := range 3 {
		if err := c.Apply([]persist.Op{{Key: fmt.Sprintf("ns/cm-%d", i), Delete: true}}, strconv.Itoa(2+i)); err != nil {
			t.Fatal(err)
		}
	}
	if cp.Tombstones() != 3 || cp.Overflows() != 0 {
		t.Fatalf("%d tombstones, %d overflows; want 3, 0", cp.Tombstones(), cp.Overflows())
	}
	if err := c.Apply([]persist.Op{{Key: "ns/cm-3", Delete: true}}, "5"); err != nil {
		t.Fatal(err)
	}
	if cp.Tombstones() != 0 || cp.Len() != 0 || cp.Overflows() != 1 {
		t.Errorf("past the bound: %d tombstones, %d acknowledged, %d overflows; want the checkpoint cleared once", cp.Tombstones(), cp.Len(), cp.Overflows())
	}
	cp.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path, persist.Options{MaxTombstones: 3})
	defer db.Close()
	c, err = db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if acks, err := c.CheckpointAcks("handler"); err != nil || len(acks) != 0 {
		t.Errorf("stored acknowledgements = %v %v, want none", acks, err)
	}
	if keys, err := c.CheckpointTombstones("handler"); err != nil || len(keys) != 0 {
		t.Errorf("stored tombstones = %v %v, want none", keys, err)
	}
}

// damageJournal overwrites the first entry of the collection's journal with
// bytes that are no journal entry.
func damageJournal(t *testing.T, path, coll string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte(coll)).Bucket(format.JournalBucket)
		if jb == nil {
			return errors.New("the collection has no journal")
		}
		gen, _ := jb.Cursor().First()
		seq, _ := jb.Bucket(gen).Cursor().First()
		return jb.Bucket(gen).Put(seq, []byte("no journal entry"))
	}); err != nil {
		t.Fatal(err)
	}
}

// A damaged journal set aside takes with it the objects only the journal
// held. A checkpoint that acknowledged one of them is given its deletion,
// as a tombstone written by the set-aside. The list that follows lacks the
// key, so no other change would tell the consumer.
func TestJournalSetAsideTombstonesAcknowledgedKeys(t *testing.T) {
	f := newCheckpointFile(t)
	put(t, f.c, "1", cm("a", "1"), cm("c", "1")) // a list: into the trees
	if err := f.c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, f.c, "2", cm("a", "2"), cm("b", "2")) // into the journal, a's entry first
	cp := f.checkpoint("handler")
	ack(t, cp, "ns/a", "2")
	ack(t, cp, "ns/b", "2")
	ack(t, cp, "ns/c", "1")
	cp.Close()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	damageJournal(t, f.path, "cms")
	f.reopen()
	if f.c.JournalSetAside() == nil {
		t.Fatal("the damaged journal was not set aside")
	}
	if keys, err := f.c.CheckpointTombstones("handler"); err != nil || !slices.Equal(keys, []string{"ns/b"}) {
		t.Errorf("after the set-aside the stored tombstones are %v (%v), want b's", keys, err)
	}
	if acks := f.stored("handler"); !maps.Equal(acks, map[string]string{"ns/a": "2", "ns/c": "1"}) {
		t.Errorf("after the set-aside the stored acknowledgements are %v, want a's and c's", acks)
	}
	cp = f.checkpoint("handler")
	d := cp.Deleted()
	if obj, ok := d["ns/b"].(*corev1.ConfigMap); !ok || obj.Name != "b" || obj.ResourceVersion != "2" {
		t.Errorf("Deleted() = %v, want b's last state, b@2", d)
	}
	if len(d) != 1 {
		t.Errorf("Deleted() = %v, want b only", d)
	}
}

// retentionFile is a cache file whose checkpoint retention reads a clock
// the test moves.
type retentionFile struct {
	t     *testing.T
	path  string
	secs  atomic.Int64 // read by the commit goroutine
	db    *persist.DB
	c     *persist.Collection
	names []string // checkpoints dropped at the last open
}

func newRetentionFile(t *testing.T) *retentionFile {
	f := &retentionFile{t: t, path: filepath.Join(t.TempDir(), "cache.db")}
	f.secs.Store(1_700_000_000)
	f.open()
	return f
}

func (f *retentionFile) advance(d time.Duration) { f.secs.Add(int64(d / time.Second)) }

func (f *retentionFile) open() {
	f.t.Helper()
	if f.db != nil {
		if err := f.db.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	clock := func() time.Time { return time.Unix(f.secs.Load(), 0) }
	f.db = openDB(f.t, f.path, persist.WithClock(persist.Options{CheckpointRetention: 7 * 24 * time.Hour}, clock))
	var err error
	if f.c, err = f.db.Collection("cms", persist.CollectionOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.names = f.c.DroppedCheckpoints()
}

func (f *retentionFile) checkpoints() []string {
	f.t.Helper()
	names, err := f.c.Checkpoints()
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func (f *retentionFile) flush() {
	f.t.Helper()
	if err := f.c.Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// Retention counts only the time the collection was in use. A process down
// for longer than the retention drops no checkpoint. Neither does a clock
// stepped forward while it was down. Neither does a quiet week in which the
// consumer kept its checkpoint open, nor its closing after it.
func TestCheckpointRetentionCountsTimeInUse(t *testing.T) {
	f := newRetentionFile(t)
	put(t, f.c, "1", cm("a", "1"), cm("b", "1"))
	cp, err := f.c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/a", "1")
	cp.Close()
	f.flush()

	f.advance(8 * 24 * time.Hour) // down for eight days
	f.open()
	if len(f.names) != 0 || !slices.Equal(f.checkpoints(), []string{"handler"}) {
		t.Fatalf("after eight days down: dropped %v, left %v; want handler kept", f.names, f.checkpoints())
	}

	f.advance(30 * 24 * time.Hour) // a clock stepped forward before the start
	f.open()
	if len(f.names) != 0 {
		t.Fatalf("after the clock stepped forward: dropped %v", f.names)
	}

	// A quiet week with the checkpoint open, no commit at all, then the
	// consumer stops and a deletion is committed.
	if cp, err = f.c.Checkpoint("handler"); err != nil {
		t.Fatal(err)
	}
	f.advance(8 * 24 * time.Hour)
	cp.Close()
	if err := f.c.Apply([]persist.Op{{Key: "ns/b", Delete: true}}, "2"); err != nil {
		t.Fatal(err)
	}
	f.flush()
	f.open()
	if len(f.names) != 0 || !slices.Equal(f.checkpoints(), []string{"handler"}) {
		t.Fatalf("after a quiet week open: dropped %v, left %v; want handler kept", f.names, f.checkpoints())
	}
	if acks := f.stored(t, "handler"); acks["ns/a"] != "1" {
		t.Errorf("handler's acknowledgements after a quiet week: %v", acks)
	}

	// Eight days in use without it: dropped.
	for range 8 * 24 {
		f.advance(time.Hour)
		put(t, f.c, "3", cm("c", "3"))
		f.flush()
	}
	f.open()
	if !slices.Equal(f.names, []string{"handler"}) {
		t.Errorf("after eight days in use without it: dropped %v, want handler", f.names)
	}
}

func (f *retentionFile) stored(t *testing.T, name string) map[string]string {
	t.Helper()
	acks, err := f.c.CheckpointAcks(name)
	if err != nil {
		t.Fatal(err)
	}
	return acks
}

// A checkpoint that was opened but never acknowledged anything, or was
// cleared, has only its stamp in the file. Retention drops that too, by the
// same measure, rather than keep the stamp for as long as the file lives.
func TestRetentionDropsStampOnlyCheckpoints(t *testing.T) {
	f := newRetentionFile(t)
	put(t, f.c, "1", cm("a", "1"))
	idle, err := f.c.Checkpoint("idle")
	if err != nil {
		t.Fatal(err)
	}
	idle.Close()
	cleared, err := f.c.Checkpoint("cleared")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cleared, "ns/a", "1")
	f.flush()
	if err := cleared.Clear(); err != nil {
		t.Fatal(err)
	}
	cleared.Close()
	active, err := f.c.Checkpoint("active")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, active, "ns/a", "1")
	for range 8 * 24 {
		f.advance(time.Hour)
		put(t, f.c, "2", cm("b", "2"))
		f.flush()
	}
	active.Close()
	f.open()
	if !slices.Equal(f.names, []string{"cleared", "idle"}) {
		t.Errorf("DroppedCheckpoints() = %v, want cleared and idle", f.names)
	}
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	bdb, err := bolt.Open(f.path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var stamped []string
	_ = bdb.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CheckpointSeenBucket)
		if sb == nil {
			return nil
		}
		return sb.ForEach(func(k, _ []byte) error {
			stamped = append(stamped, string(k))
			return nil
		})
	})
	if !slices.Equal(stamped, []string{"active"}) {
		t.Errorf("stamped checkpoints left in the file: %v, want active only", stamped)
	}
}
