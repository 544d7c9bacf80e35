package persist_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

func openDB(t *testing.T, path string, opts persist.Options) *persist.DB {
	t.Helper()
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	db, err := persist.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
}

func put(t *testing.T, c *persist.Collection, rv string, objs ...*corev1.ConfigMap) {
	t.Helper()
	ops := make([]persist.Op, len(objs))
	for i, o := range objs {
		ops[i] = persist.Op{Key: o.Namespace + "/" + o.Name, Object: o}
	}
	if err := c.Apply(ops, rv); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCreatesPrivateFileAndDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "informer")
	path := filepath.Join(dir, "cache.db")
	openDB(t, path, persist.Options{})
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
}

// TestLockedFileFailsWithinTimeout: a file another process holds is waited
// for at most LockTimeout, then refused saying so.
func TestLockedFileFailsWithinTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	holdFile(t, path)
	for _, readOnly := range []bool{false, true} {
		start := time.Now()
		_, err := persist.Open(path, persist.Options{LockTimeout: 300 * time.Millisecond, ReadOnly: readOnly})
		elapsed := time.Since(start)
		if !errors.Is(err, persist.ErrLocked) {
			t.Fatalf("readOnly=%v: err = %v, want ErrLocked", readOnly, err)
		}
		if elapsed > 5*time.Second {
			t.Errorf("readOnly=%v: waited %v for a 300ms lock timeout", readOnly, elapsed)
		}
		if errors.Is(err, persist.ErrOpenInProcess) {
			t.Errorf("readOnly=%v: err = %v, blames this process", readOnly, err)
		}
		for _, want := range []string{path, "another process", "snapshot"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
}

func TestSchemaAndForeignFiles(t *testing.T) {
	dir := t.TempDir()

	newer := filepath.Join(dir, "newer.db")
	bdb, err := bolt.Open(newer, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("boltinformer"))
		return b.Put([]byte("schema"), []byte("99"))
	})
	_ = bdb.Close()
	if _, err := persist.Open(newer, persist.Options{}); !errors.Is(err, persist.ErrSchemaUnsupported) || !strings.Contains(err.Error(), "99") {
		t.Errorf("newer schema: %v", err)
	}

	foreign := filepath.Join(dir, "foreign.db")
	bdb, _ = bolt.Open(foreign, 0o600, nil)
	_ = bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("something")); return err })
	_ = bdb.Close()
	if _, err := persist.Open(foreign, persist.Options{}); !errors.Is(err, persist.ErrNotCacheFile) {
		t.Errorf("foreign bbolt file: %v", err)
	}

	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := persist.Open(garbage, persist.Options{}); !errors.Is(err, persist.ErrCorrupt) {
		t.Errorf("garbage file: %v", err)
	}
	if data, _ := os.ReadFile(garbage); !strings.HasPrefix(string(data), "not a database") {
		t.Error("opening a corrupt file modified it")
	}
}

func TestReadOnlyOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	if _, err := persist.Open(path, persist.Options{ReadOnly: true}); err == nil {
		t.Error("read-only open of a missing file succeeded")
	}
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("configmaps", persist.CollectionOptions{Description: map[string]string{"resource": "configmaps"}})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "7", cm("a", "7"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro := openDB(t, path, persist.Options{ReadOnly: true})
	infos, err := ro.Collections()
	if err != nil || len(infos) != 1 || infos[0].Name != "configmaps" || infos[0].ResourceVersion != "7" || infos[0].Objects != 1 ||
		infos[0].Description["resource"] != "configmaps" {
		t.Fatalf("Collections() = %+v, %v", infos, err)
	}
	rc, err := ro.Collection("configmaps", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj, ok, err := rc.Get("ns/a"); !ok || err != nil || obj.(*corev1.ConfigMap).ResourceVersion != "7" {
		t.Errorf("Get = %v %v %v", obj, ok, err)
	}
	if err := rc.Apply(nil, "8"); !errors.Is(err, persist.ErrReadOnly) {
		t.Errorf("Apply on read-only: %v", err)
	}
	if _, err := ro.Collection("missing", persist.CollectionOptions{}); !errors.Is(err, persist.ErrNoCollection) {
		t.Errorf("missing collection: %v", err)
	}
	// Two readers share the lock.
	openDB(t, path, persist.Options{ReadOnly: true, LockTimeout: time.Second})
}

func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{BatchInterval: time.Hour, BatchLimit: 50, NoSync: true})
	var mu sync.Mutex
	var commits []persist.CommitStats
	db.AddCommitObserver(func(s persist.CommitStats) { mu.Lock(); commits = append(commits, s); mu.Unlock() })
	a, _ := db.Collection("a", persist.CollectionOptions{})
	b, _ := db.Collection("b", persist.CollectionOptions{})

	put(t, a, "1", cm("x", "1"))
	put(t, b, "1", cm("y", "1"))
	if rv, _ := a.CommittedResourceVersion(); rv != "" {
		t.Fatalf("committed RV %q before any commit trigger", rv)
	}
	if rv := a.ResourceVersion(); rv != "1" {
		t.Fatalf("applied RV = %q", rv)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(commits) != 1 || commits[0].Changes != 2 {
		t.Errorf("one flush of two collections made commits %+v, want one of 2 changes", commits)
	}
	commits = nil
	mu.Unlock()
	for _, c := range []*persist.Collection{a, b} {
		if rv, _ := c.CommittedResourceVersion(); rv != "1" {
			t.Errorf("%s: committed RV = %q", c.Name(), rv)
		}
	}

	// Reaching BatchLimit starts a commit without a flush or the timer.
	for n := 2; n < 60; n++ {
		put(t, a, strconv.Itoa(n), cm("k"+strconv.Itoa(n), strconv.Itoa(n)))
	}
	poll.Until(t, 10*time.Second, "a commit triggered by BatchLimit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(commits) > 0
	})
	rv, _ := a.CommittedResourceVersion()
	if n, _ := strconv.Atoi(rv); n < 50 {
		t.Errorf("after the limit commit, committed RV = %q, want ≥ 50", rv)
	}

	// A bookmark alone (no objects) is committed too.
	if err := a.Apply(nil, "100"); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rv, _ := a.CommittedResourceVersion(); rv != "100" {
		t.Errorf("bookmark RV not committed: %q", rv)
	}
}

func TestCloseCommitsPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, BatchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := db.Collection("c", persist.CollectionOptions{})
	put(t, c, "5", cm("a", "5"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(nil, "6"); !errors.Is(err, persist.ErrClosed) {
		t.Errorf("Apply after Close: %v", err)
	}
	db = openDB(t, path, persist.Options{})
	c, _ = db.Collection("c", persist.CollectionOptions{})
	if c.ResourceVersion() != "5" {
		t.Errorf("RV after reopen = %q", c.ResourceVersion())
	}
	if _, ok, _ := c.Get("ns/a"); !ok {
		t.Error("object applied before Close is missing")
	}
}

func TestHotSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "cache.db"), persist.Options{BatchInterval: time.Millisecond, NoSync: true})
	c, _ := db.Collection("c", persist.CollectionOptions{})
	stop := make(chan struct{})
	done := make(chan struct{})
	writing := make(chan struct{}) // closed once the writer is well under way
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			if n == 100 {
				close(writing)
			}
			select {
			case <-stop:
				return
			default:
			}
			rv := strconv.Itoa(n)
			// Each step rewrites one object per step: the snapshot must hold
			// objects 1..rv exactly.
			if err := c.Apply([]persist.Op{{Key: "ns/k" + rv, Object: cm("k"+rv, rv)}}, rv); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-writing:
	case <-done: // the writer failed (and said why)
		t.FailNow()
	}
	snap := filepath.Join(dir, "snap.db")
	if err := db.SnapshotFile(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if st, err := os.Stat(snap); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot stat: %v %v", st, err)
	}
	sdb := openDB(t, snap, persist.Options{ReadOnly: true})
	sc, err := sdb.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.Atoi(sc.ResourceVersion())
	keys, _ := sc.Keys()
	if rv == 0 || len(keys) != rv {
		t.Errorf("snapshot at RV %d holds %d objects; want exactly the prefix 1..%d", rv, len(keys), rv)
	}
}

func TestCollectionCloseReleasesName(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{BatchInterval: time.Hour, NoSync: true})
	c, err := db.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c", persist.CollectionOptions{}); err == nil {
		t.Fatal("opened one collection twice")
	}
	put(t, c, "3", cm("a", "3"))
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(nil, "4"); !errors.Is(err, persist.ErrClosed) {
		t.Errorf("Apply after Close: %v", err)
	}
	if _, ok, _ := c.Get("ns/a"); !ok {
		t.Error("reads stopped working after Close")
	}
	again, err := db.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := again.ResourceVersion(); rv != "3" {
		t.Errorf("reopened collection RV = %q, want 3 (flushed by Close)", rv)
	}
}

// A truncated file must be reported, not crash the process: bbolt would map
// it and fault (SIGBUS) reading pages past its end.
func TestTruncatedFileIsDetectedAndCanBeMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := db.Collection("pods", persist.CollectionOptions{})
	var ops []persist.Op
	for i := 0; i < 2000; i++ {
		p := fixture.Pod(i)
		ops = append(ops, persist.Op{Key: p.Name, Object: p})
	}
	if err := c.Apply(ops, "9"); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The file is preallocated past its last page: only cuts below the
	// pages in use lose data.
	// A snapshot is exactly the pages below bbolt's high-water mark.
	n, err := db.Snapshot(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	used := int(n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []int{used / 2, used / 8, used - 4096, 40000} {
		truncated := filepath.Join(dir, "truncated.db")
		if err := os.WriteFile(truncated, whole[:keep], 0o600); err != nil {
			t.Fatal(err)
		}
		tdb, err := persist.Open(truncated, persist.Options{Scheme: scheme.Scheme, LockTimeout: time.Second})
		if err == nil {
			tdb.Close()
		}
		if !errors.Is(err, persist.ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d of %d bytes in use: Open = %v, want ErrCorrupt naming truncation", keep, used, err)
		}
	}

	// With MoveAsideCorrupt, the file is kept under another name and a cold
	// (empty) file takes its place.
	if err := os.WriteFile(path, whole[:used/2], 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := openDB(t, path, persist.Options{MoveAsideCorrupt: true})
	aside := fresh.MovedAside()
	if aside == "" || !strings.HasPrefix(aside, path+".corrupt-") {
		t.Fatalf("MovedAside = %q", aside)
	}
	if kept, err := os.ReadFile(aside); err != nil || len(kept) != used/2 {
		t.Errorf("moved-aside file: %d bytes, %v", len(kept), err)
	}
	if infos, err := fresh.Collections(); err != nil || len(infos) != 0 {
		t.Errorf("fresh file holds %v, %v", infos, err)
	}
}

// TestRecordsSurviveBufferReuse writes successive versions of a few keys
// while commits run and readers read. Record buffers of committed changes
// are reused for later writes. A reuse too early would show up as a reader
// seeing another version's record, or the file holding one.
func TestRecordsSurviveBufferReuse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{BatchInterval: time.Millisecond, BatchLimit: 7, NoSync: true})
	c, err := db.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const keys, versions = 20, 100
	obj := func(k, v int) *corev1.ConfigMap {
		o := cm("k"+strconv.Itoa(k), strconv.Itoa(v*keys+k))
		// Sizes vary so that buffers of one size are reused for another.
		o.Data = map[string]string{"v": strings.Repeat(strconv.Itoa(v), 1+(v*7+k)%50)}
		return o
	}
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for ctx.Err() == nil {
				rvs, err := c.ResourceVersions()
				if err != nil {
					t.Error(err)
					return
				}
				for key, rv := range rvs {
					n, _ := strconv.Atoi(rv)
					if want := "ns/k" + strconv.Itoa(n%keys); key != want {
						t.Errorf("record under %s holds resourceVersion %s, which belongs to %s", key, rv, want)
						return
					}
				}
			}
		})
	}
	for v := range versions {
		for k := range keys {
			put(t, c, strconv.Itoa(v*keys+k), obj(k, v))
		}
	}
	cancel()
	readers.Wait()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path, persist.Options{ReadOnly: true})
	c, err = db.Collection("c", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		got, ok, err := c.Get("ns/k" + strconv.Itoa(k))
		if err != nil || !ok {
			t.Fatalf("k%d: %v, found %v", k, err, ok)
		}
		want := obj(k, versions-1)
		if g := got.(*corev1.ConfigMap); g.ResourceVersion != want.ResourceVersion || g.Data["v"] != want.Data["v"] {
			t.Errorf("k%d in the file: resourceVersion %s data %q, want %s %q", k, g.ResourceVersion, g.Data["v"], want.ResourceVersion, want.Data["v"])
		}
	}
}

// After DB.Close, every read that needs the file fails with ErrClosed, not
// with bbolt's own error: callers test for ErrClosed.
func TestReadsAfterDBCloseFailWithErrClosed(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "writer", true: "read-only"}[readOnly], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			byName := func(_ string, obj runtime.Object) ([]string, error) {
				return []string{obj.(*corev1.ConfigMap).Name}, nil
			}
			opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName}
			db := openDB(t, path, persist.Options{})
			c, err := db.Collection("cms", opts)
			if err != nil {
				t.Fatal(err)
			}
			putNamed(t, c, "1", cm("a", "1"), cm("b", "1"))
			cp, err := c.Checkpoint("handler")
			if err != nil {
				t.Fatal(err)
			}
			ack(t, cp, "ns/a", "1")
			cp.Close()
			if readOnly {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = openDB(t, path, persist.Options{ReadOnly: true})
				if c, err = db.Collection("cms", opts); err != nil {
					t.Fatal(err)
				}
			}
			if cp, err = c.Checkpoint("reader"); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			reads := map[string]func() error{
				"Get":                      func() error { _, _, err := c.Get("ns/absent"); return err },
				"GetMany":                  func() error { _, err := c.GetMany([]string{"ns/a", "ns/b"}); return err },
				"List":                     func() error { _, err := c.List(); return err },
				"AppendList":               func() error { _, err := c.AppendList(nil); return err },
				"Keys":                     func() error { _, err := c.Keys(); return err },
				"Len":                      func() error { _, err := c.Len(); return err },
				"ForEach":                  func() error { return c.ForEach(func(string, runtime.Object) error { return nil }) },
				"ResourceVersions":         func() error { _, err := c.ResourceVersions(); return err },
				"Versions":                 func() error { _, err := c.Versions(); return err },
				"IndexKeys":                func() error { _, err := c.IndexKeys("name", "a"); return err },
				"ByIndex":                  func() error { _, err := c.ByIndex("name", "a"); return err },
				"AppendByIndex":            func() error { _, err := c.AppendByIndex(nil, "name", "a"); return err },
				"IndexValues":              func() error { _, err := c.IndexValues("name"); return err },
				"StoredIndexValues":        func() error { _, err := c.StoredIndexValues([]string{"ns/a"}); return err },
				"CommittedResourceVersion": func() error { _, err := c.CommittedResourceVersion(); return err },
				"Checkpoints":              func() error { _, err := c.Checkpoints(); return err },
				"CheckpointAcks":           func() error { _, err := c.CheckpointAcks("handler"); return err },
				"Checkpoint":               func() error { _, err := c.Checkpoint("handler"); return err },
				"Checkpoint.Unacknowledged": func() error {
					_, _, err := cp.Unacknowledged()
					return err
				},
				"DB.Collections":  func() error { _, err := db.Collections(); return err },
				"DB.Snapshot":     func() error { _, err := db.Snapshot(io.Discard); return err },
				"DB.SnapshotFile": func() error { return db.SnapshotFile(context.Background(), path+".snap") },
			}
			for name, read := range reads {
				if err := read(); !errors.Is(err, persist.ErrClosed) {
					t.Errorf("%s after DB.Close = %v, want ErrClosed", name, err)
				}
			}
		})
	}
}
