package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

const diskFullEnv = "BOLTINFORMER_DISKFULL_CHILD"

// TestDiskFullKeepsServingAndCatchesUp runs TestDiskFullChild in a child
// process, where RLIMIT_FSIZE makes the kernel refuse to grow the cache file
// (EFBIG) — a real write error, as a full disk gives, without filling one.
// The limit is process-wide, hence the child.
func TestDiskFullKeepsServingAndCatchesUp(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullChild$", "-test.v")
	cmd.Env = append(os.Environ(), diskFullEnv+"="+filepath.Join(t.TempDir(), "cache.db"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDiskFullChild") {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", grepLines(string(out), "diskfull:"))
}

func grepLines(s, prefix string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, prefix) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

func TestDiskFullChild(t *testing.T) {
	path := os.Getenv(diskFullEnv)
	if path == "" {
		t.Skip("run by TestDiskFullKeepsServingAndCatchesUp")
	}
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, BatchInterval: 5 * time.Millisecond, MmapSize: 1 << 26})
	if err != nil {
		t.Fatal(err)
	}
	src := fcache.NewFakeControllerSource()
	for i := 0; i < 10; i++ {
		src.Add(fixture.Pod(i))
	}
	inf, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{DB: db, Collection: "pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []error
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	coll := inf.Indexer().Collection()
	before, _ := coll.CommittedResourceVersion()

	// The disk is full: nothing may be written past the pages in use (bbolt
	// preallocates the file, so its size is no limit).
	// A snapshot is exactly the pages below bbolt's high-water mark.
	used, err := db.Snapshot(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	setFileSizeLimit(t, uint64(used))
	const n = 3000
	for i := 10; i < 10+n; i++ {
		src.Add(fixture.Pod(i))
	}
	poll.Until(t, 30*time.Second, "the informer to serve every object from memory", func() bool { return len(inf.GetStore().ListKeys()) == 10+n })
	poll.Until(t, 30*time.Second, "the watch error handler to hear of it", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0
	})
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, syscall.EFBIG) || !strings.Contains(first.Error(), "serving from memory") {
		t.Errorf("reported %v; want the EFBIG write error and what the informer does about it", first)
	}
	if err := db.Err(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("db.Err() = %v", err)
	}
	applied := coll.ResourceVersion()
	committed, _ := coll.CommittedResourceVersion()
	if committed != before {
		t.Errorf("committed RV moved from %s to %s while every commit failed", before, committed)
	}
	fmt.Printf("diskfull: %d objects served from memory at RV %s, file still at RV %s, reported: %v\n", 10+n, applied, committed, first)

	// Space returns: the file catches up, in one commit or a few.
	setFileSizeLimit(t, ^uint64(0)) // RLIM_INFINITY
	poll.Until(t, 30*time.Second, "the file to catch up", func() bool {
		committed, _ := coll.CommittedResourceVersion()
		return committed == applied && db.Err() == nil
	})
	cancel()
	<-done
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reopened, err := db.Collection("pods", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := reopened.Len(); got != 10+n || reopened.ResourceVersion() != applied {
		t.Errorf("after catching up the file holds %d objects at RV %s; want %d at %s", got, reopened.ResourceVersion(), 10+n, applied)
	}
	fmt.Printf("diskfull: after the limit was lifted the file holds %d objects at RV %s\n", 10+n, applied)
}

func setFileSizeLimit(t *testing.T, limit uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatalf("setrlimit(RLIMIT_FSIZE, %d): %v", limit, err)
	}
}
