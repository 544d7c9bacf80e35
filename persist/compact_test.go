package persist_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// TestCompact: after mass deletions a compacted copy is smaller, opens as a
// cache file with the same objects, indexes and resourceVersion, and the
// source is untouched. Compact refuses an existing destination and a source
// a running process holds.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "cache.db")
	db, err := persist.Open(src, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	byNS := map[string]string{"namespace": "1"}
	coll, err := db.Collection("pods", persist.CollectionOptions{Indexes: byNS, IndexValues: func(string, runtime.Object) ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var ops []persist.Op
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", i%5), Name: fmt.Sprintf("p-%04d", i), ResourceVersion: "1",
			Annotations: map[string]string{"pad": strings.Repeat("x", 2000)},
		}}
		ops = append(ops, persist.Op{Key: p.Namespace + "/" + p.Name, Object: p, Indexes: map[string][]string{"namespace": {p.Namespace}}})
	}
	if err := coll.Apply(ops, "10"); err != nil {
		t.Fatal(err)
	}
	var deletes []persist.Op
	for _, op := range ops[n/10:] {
		deletes = append(deletes, persist.Op{Key: op.Key, Delete: true})
	}
	if err := coll.Apply(deletes, "20"); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(dir, "compact.db")
	// The running process holds the file: refused, nothing written.
	if _, err := persist.Compact(context.Background(), src, dst, persist.CompactOptions{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, persist.ErrLocked) {
		t.Errorf("compacting a file in use: %v, want ErrLocked", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused compaction left %s behind (%v)", dst, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := persist.Compact(context.Background(), src, dst, persist.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DstBytes <= 0 || stats.DstBytes >= stats.SrcBytes {
		t.Errorf("compacted %d bytes to %d; want it smaller", stats.SrcBytes, stats.DstBytes)
	}
	if after, _ := os.ReadFile(src); string(after) != string(before) {
		t.Error("Compact changed its source")
	}
	if _, err := persist.Compact(context.Background(), src, dst, persist.CompactOptions{}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("compacting onto an existing file: %v, want a refusal", err)
	}

	out, err := persist.Open(dst, persist.Options{Scheme: scheme.Scheme, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	c, err := out.Collection("pods", persist.CollectionOptions{Indexes: byNS})
	if err != nil {
		t.Fatal(err)
	}
	if rv := c.ResourceVersion(); rv != "20" {
		t.Errorf("resourceVersion %q, want 20", rv)
	}
	objs, err := c.List()
	if err != nil || len(objs) != n/10 {
		t.Errorf("List: %d objects, %v; want %d", len(objs), err, n/10)
	}
	keys, err := c.IndexKeys("namespace", "ns-3")
	if err != nil || len(keys) != n/10/5 {
		t.Errorf("IndexKeys(ns-3): %d keys, %v; want %d", len(keys), err, n/10/5)
	}
}
