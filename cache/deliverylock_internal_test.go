package cache

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// A watch event for a key the warm start's walk has not reached makes the
// informer hand the key's stored state out first (warmDelivery.handOut).
// If that state cannot be read, the watch error handler is told. The
// handler is the user's code, and may call back into the informer, whose
// delivery lock it must then not find held: the project never calls a
// user's callback while holding a lock. The handler here probes the lock.
func TestWarmDeliveryTellsTheWatchErrorHandlerWithoutItsLock(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c"} {
		src.Add(setAsidePod(n))
	}
	f := newStoredFile(t, src)
	f.coldStart(nil, 3)
	f.damage("ns/b")

	// The walk waits, so that the event meets ns/b first, and nothing but
	// the hand-out may hold the delivery's lock while the handler probes.
	walking, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	walkStarting = func() { close(walking); <-release }
	defer func() { walkStarting = nil }()
	defer releaseWalk()

	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	var probing atomic.Bool
	probing.Store(true)
	var mu sync.Mutex
	var heard, heldDuring []string
	err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		msg := err.Error()
		held := false
		if d := inf.start.walk.Load(); d != nil && probing.Load() {
			if d.mu.TryLock() {
				d.mu.Unlock()
			} else {
				held = true
			}
		}
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, msg)
		if held {
			heldDuring = append(heldDuring, msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInformer(inf)
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()
	<-walking

	p := setAsidePod("b")
	p.Labels = map[string]string{"v": "2"}
	src.Modify(p)
	poll.Until(t, 30*time.Second, "the watch error handler told that ns/b could not be handed out", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range heard {
			if strings.Contains(msg, `reading "ns/b" to hand it to the handlers`) {
				return true
			}
		}
		return false
	})
	probing.Store(false)
	releaseWalk()
	stop()

	mu.Lock()
	defer mu.Unlock()
	if len(heldDuring) > 0 {
		t.Errorf("the watch error handler was called with the warm delivery's lock held, for: %q", heldDuring)
	}
}
