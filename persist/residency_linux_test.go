package persist_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// rssFileKiB reads this process's resident memory mapped from files:
// RssFile, plus RssShmem for a file on tmpfs.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	total, found := 0, false
	s := bufio.NewScanner(f)
	for s.Scan() {
		for _, field := range []string{"RssFile:", "RssShmem:"} {
			if v, ok := strings.CutPrefix(s.Text(), field); ok {
				n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				if err != nil {
					t.Fatal(err)
				}
				total, found = total+n, true
			}
		}
	}
	if !found {
		t.Skip("no RssFile in /proc/self/status")
	}
	return total
}

// After a walk has faulted the file in, ReleaseMappedPages takes its pages
// out of the resident set, and reads still return every object.
func TestReleaseMappedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("pods", persist.CollectionOptions{CacheObjects: 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8000
	ops := make([]persist.Op, n)
	for i := range ops {
		p := fixture.Pod(i)
		ops[i] = persist.Op{Key: p.Namespace + "/" + p.Name, Object: p}
	}
	if err := c.Apply(ops, "1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fileKiB := int(mustStat(t, path).Size() / 1024)

	count := 0
	walk := func(string, runtime.Object) error { count++; return nil }
	if err := c.ForEach(walk); err != nil || count != n {
		t.Fatalf("walk: %d objects, %v", count, err)
	}
	before := rssFileKiB(t)
	if err := db.ReleaseMappedPages(); err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if dropped := before - after; dropped < fileKiB/2 {
		t.Errorf("resident file memory went from %d to %d KiB; the walked file is %d KiB", before, after, fileKiB)
	}

	count = 0
	if err := c.ForEach(walk); err != nil || count != n {
		t.Fatalf("walk after release: %d objects, %v", count, err)
	}
	obj, ok, err := c.Get(ops[n/2].Key)
	if err != nil || !ok || obj.(*corev1.Pod).Name != ops[n/2].Object.(*corev1.Pod).Name {
		t.Fatalf("Get after release: %v %v %v", obj, ok, err)
	}
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
