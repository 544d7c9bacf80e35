package persist_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/boltinformer/boltinformer/persist"
)

// mappedBytes is the size of this process's memory map of path, from
// /proc/self/maps.
func mappedBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != path {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("reading %q", sc.Text())
		}
		total += int64(end - start)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// A file that holds a collection is mapped with room to double when opened
// again. So a restart rewriting much of it, such as a recovery, does not
// remap in the middle. bbolt would otherwise map the next power of two, or
// gigabyte, above the file's size.
func TestOpenMapsRoomToDouble(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	writePods(t, path, 3000)
	size := mustStat(t, path).Size()

	db := openDB(t, path, persist.Options{MmapSize: 64 << 10})
	defer db.Close()
	if mapped := mappedBytes(t, path); mapped < 2*size {
		t.Errorf("a file of %d bytes is mapped in %d bytes, want at least %d", size, mapped, 2*size)
	}
}
