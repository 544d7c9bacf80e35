package persist_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// The child test reads the file's path and the collection's index version
// from these.
const (
	openWriteFailEnv    = "BOLTINFORMER_OPENWRITEFAIL_CHILD"
	openWriteFailIndexV = "BOLTINFORMER_OPENWRITEFAIL_INDEX_VERSION"
)

// openWriteStates are the states of a file that make Open, or DB.Collection
// after it, write. Each prepares the file at path and returns the index
// version the child opens the collection with.
var openWriteStates = []struct {
	name    string
	prepare func(t *testing.T, path string) (indexVersion string)
}{
	{"a new file", func(t *testing.T, path string) string { return "1" }},
	{"an empty bbolt file", func(t *testing.T, path string) string {
		bdb, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := bdb.Close(); err != nil {
			t.Fatal(err)
		}
		return "1"
	}},
	{"another writer committed last", func(t *testing.T, path string) string {
		writeOpenWriteFile(t, path)
		// Another writer commits, changing nothing a reader would see.
		updateFile(t, path, func(tx *bolt.Tx) error {
			meta := tx.Bucket(format.MetaBucket)
			return meta.Put(format.SchemaKey, append([]byte(nil), meta.Get(format.SchemaKey)...))
		})
		return "1"
	}},
	{"an older schema", func(t *testing.T, path string) string {
		writeOpenWriteFile(t, path)
		updateFile(t, path, func(tx *bolt.Tx) error {
			return tx.Bucket(format.MetaBucket).Put(format.SchemaKey, []byte("2"))
		})
		return "1"
	}},
	{"an index at another version", func(t *testing.T, path string) string {
		writeOpenWriteFile(t, path)
		return "2"
	}},
	{"a damaged index entry", func(t *testing.T, path string) string {
		writeOpenWriteFile(t, path)
		updateFile(t, path, func(tx *bolt.Tx) error {
			b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
			return b.Bucket(format.IndexesBucket).Bucket([]byte("name")).Bucket(format.ByValueBucket).Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
		})
		return "1"
	}},
}

// writeOpenWriteFile writes a file at path with the collection "cms" of
// three configmaps, indexed by name at version 1.
func writeOpenWriteFile(t *testing.T, path string) {
	t.Helper()
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName})
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "3", cm("a", "1"), cm("b", "2"), cm("c", "3"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A write at open that the disk refuses (full, out of quota) says nothing
// of the file. Reporting it as ErrCorrupt makes Options.MoveAsideCorrupt
// (README's first example) rename a sound file aside and start cold, and
// without it the start fails calling a sound file corrupt. Every state of
// the file that makes Open or DB.Collection write is opened in a child
// process under RLIMIT_FSIZE, so that the kernel refuses the write
// (EFBIG), as a full disk refuses it (ENOSPC), without filling one (see
// cache's TestDiskFullKeepsServingAndCatchesUp). No error may be
// corruption, no file may move aside, and an open without the limit must
// then find every object.
func TestOpenWriteFailureOfASoundFileIsNotCorruption(t *testing.T) {
	for _, state := range openWriteStates {
		t.Run(state.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			version := state.prepare(t, path)
			cmd := exec.Command(os.Args[0], "-test.run=^TestOpenWriteFailureChild$", "-test.v")
			cmd.Env = append(os.Environ(), openWriteFailEnv+"="+path, openWriteFailIndexV+"="+version)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenWriteFailureChild") {
				t.Fatalf("child failed: %v\n%s", err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "the open under the limit") {
					t.Log(strings.TrimSpace(line))
				}
			}
			if state.name == "a new file" || state.name == "an empty bbolt file" {
				return
			}
			db := openDB(t, path, persist.Options{})
			c, err := db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"name": version}, IndexValues: byName})
			if err != nil {
				t.Fatalf("opening the file without the limit: %v", err)
			}
			keys, err := c.Keys()
			if slices.Sort(keys); err != nil || !slices.Equal(keys, []string{"ns/a", "ns/b", "ns/c"}) {
				t.Errorf("after the failed write, the file holds %v, %v; want [ns/a ns/b ns/c]", keys, err)
			}
		})
	}
}

func TestOpenWriteFailureChild(t *testing.T) {
	path := os.Getenv(openWriteFailEnv)
	if path == "" {
		t.Skip("run by TestOpenWriteFailureOfASoundFileIsNotCorruption")
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = 16 << 10 // below every page a write transaction writes
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatalf("setrlimit(RLIMIT_FSIZE): %v", err)
	}
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, MoveAsideCorrupt: true})
	if err == nil {
		defer db.Close()
		_, err = db.Collection("cms", persist.CollectionOptions{Indexes: map[string]string{"name": os.Getenv(openWriteFailIndexV)}, IndexValues: byName})
	}
	t.Logf("the open under the limit: %v", err)
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) > 0 || errors.Is(err, persist.ErrCorrupt) || errors.Is(err, persist.ErrCorruptRecord) {
		moved := ""
		if db != nil {
			moved = db.MovedAside()
		}
		t.Errorf("Open of a sound file whose write failed (the disk refuses to grow it) = %v; moved aside to %v (MovedAside %q): "+
			"want the file kept where it is, and no corruption reported", err, aside, moved)
	}
}
