package cache

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// A watch event for a key the warm start's walk has not reached makes the
// informer hand the key's stored state out first (warmDelivery.handOut).
// If that state cannot be read, the watch error handler is told. The
// handler is the user's code, and may call back into the informer, whose
// delivery lock it must then not find held: the project never calls a
// user's callback while holding a lock. The handler here probes the lock.
func TestWarmDeliveryTellsTheWatchErrorHandlerWithoutItsLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	open := func() *persist.DB {
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c"} {
		src.Add(setAsidePod(n))
	}
	newInformer := func(db *persist.DB) *Informer {
		inf, err := NewSharedIndexInformerWithOptions(setAsideNoWatchList{src}, &corev1.Pod{}, InformerOptions{
			Persistence:    Persistence{DB: db, Collection: "pods"},
			InitialBackoff: time.Millisecond,
			MaxBackoff:     10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return inf
	}
	run := func(inf *Informer) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { inf.RunWithContext(ctx); close(done) }()
		return sync.OnceFunc(func() { cancel(); <-done })
	}

	db := open()
	inf := newInformer(db)
	stop := run(inf)
	poll.Until(t, 30*time.Second, "the cold start's list stored", func() bool {
		return inf.HasSynced() && len(inf.GetStore().ListKeys()) == 3
	})
	stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("collections")).Bucket([]byte("pods")).Bucket([]byte("objects")).Put([]byte("ns/b"), []byte("not a record"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}

	// The walk waits, so that the event meets ns/b first, and nothing but
	// the hand-out may hold the delivery's lock while the handler probes.
	walking, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	walkStarting = func() { close(walking); <-release }
	defer func() { walkStarting = nil }()
	defer releaseWalk()

	db = open()
	defer db.Close()
	inf = newInformer(db)
	var probing atomic.Bool
	probing.Store(true)
	var mu sync.Mutex
	var heard, heldDuring []string
	err = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		msg := err.Error()
		held := false
		if d := inf.walk.Load(); d != nil && probing.Load() {
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
	stop = run(inf)
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
