package cache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// A warm start with no start handler holds its walk back for each
// checkpoint open at the start. The checkpoint's handler joins late, as
// controller-runtime's do. The walk waits until that handler has
// acknowledged what it was given at the join, or the checkpoint is closed.
// The restart's owed work thus goes first.
func TestCheckpointOwedWorkGoesBeforeTheWalk(t *testing.T) {
	for _, end := range []string{"acknowledged", "closed"} {
		t.Run(end, func(t *testing.T) {
			f, src, changed := acknowledgedFile(t)

			held := make(chan struct{})
			var heldOnce sync.Once
			t.Cleanup(bcache.SetWalkHooks(nil, func() { heldOnce.Do(func() { close(held) }) }))
			inf, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
				Persistence: bcache.Persistence{DB: f.db, Collection: "pods"},
			})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := inf.Checkpoint("owed")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { inf.RunWithContext(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			awaitChan(t, held, "the walk to be held back")
			awaitChan(t, inf.HasSyncedChecker().Done(), "the informer to sync")
			walked := bcache.WalkEndedForTest(inf)
			ended := func() bool {
				select {
				case <-walked:
					return true
				default:
					return false
				}
			}

			late := &events{}
			handle, err := cp.AddEventHandler(late.handler())
			if err != nil {
				t.Fatal(err)
			}
			awaitChan(t, handle.HasSyncedChecker().Done(), "the checkpoint's handler to sync")
			late.waitFor(t, len(changed), "the owed adds")
			if got := late.list(); len(got) != len(changed) {
				t.Fatalf("the late handler got %v, want the %d changed Pods", got, len(changed))
			}
			if ended() {
				t.Fatal("the walk ended before the owed work was acknowledged")
			}
			if end == "closed" {
				cp.Close()
			} else {
				for i, name := range changed {
					obj, ok, err := inf.GetStore().GetByKey("ns/" + name)
					if err != nil || !ok {
						t.Fatalf("ns/%s: %v, %v", name, ok, err)
					}
					if err := cp.Ack(obj); err != nil {
						t.Fatal(err)
					}
					if i < len(changed)-1 && ended() {
						t.Fatalf("the walk ended with %d of %d owed keys acknowledged", i+1, len(changed))
					}
				}
			}
			awaitChan(t, walked, fmt.Sprintf("the walk to end once the checkpoint was %s", end))
		})
	}
}

// A relist (a 410 without a recovery) needs the walk's end before it
// applies its list. The checkpoint's handler joins only once the informer
// synced. So the relist makes a walk held for the checkpoint go on, and the
// informer syncs well within the hold's minute.
func TestCheckpointHoldGivesWayToARelist(t *testing.T) {
	f, src, _ := acknowledgedFile(t)
	src.ResetWatch() // the stored resourceVersion is gone: a relist
	inf, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence:    bcache.Persistence{DB: f.db, Collection: "pods"},
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Checkpoint("owed"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	awaitChan(t, inf.HasSyncedChecker().Done(), "the informer to sync after its relist")
	awaitChan(t, bcache.WalkEndedForTest(inf), "the walk's end")
	if got, want := storeState(inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("store %v, want %v", got, want)
	}
}

// acknowledgedFile fills a cache file with 1,000 Pods, every one
// acknowledged by the checkpoint "owed", then changes three of them at the
// source (as while the program is down) and returns them.
func acknowledgedFile(t *testing.T) (*testFile, *fcache.FakeControllerSource, []string) {
	t.Helper()
	const n = 1000 // several of the walk's chunks
	f := newTestFile(t)
	src := podSource(podNames(n)...)
	t.Cleanup(src.Shutdown)
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("owed"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(ackingHandler{recordingHandler{&events{}}, t, cp}); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	poll.Until(t, 30*time.Second, "every Pod acknowledged", func() bool { return cp.Len() == n })
	r.stop()
	f.reopen()
	changed := []string{"p00003", "p00500", "p00900"}
	for _, name := range changed {
		src.Modify(pod("ns", name, "", map[string]string{"changed": "yes"}))
	}
	return f, src, changed
}

// awaitChan waits for ch, failing the test after 30 s.
func awaitChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
