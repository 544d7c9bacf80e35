package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// caughtUp tracks InformerOptions.WaitCaughtUp: it is done once the store
// has applied a resourceVersion at least that of a consistent read taken
// when the informer started.
//
// resourceVersions are opaque to clients, but those of an etcd-backed
// apiserver are etcd revisions: unsigned integers that grow with every
// write, and a list's resourceVersion is the revision it was read at (the
// apiserver compares them the same way, as integers, in its watch cache).
// When the read's or the applied resourceVersion does not parse as an
// unsigned integer (another storage behind the apiserver), nothing can be
// compared, and the first event or bookmark applied after the read counts:
// the watch delivers in order, so it follows everything the read saw only if
// the server sent it after the read; that is the best an opaque version
// allows.
type caughtUp struct {
	mu      sync.Mutex
	known   bool   // the read returned; target is set
	target  string // the read's resourceVersion
	targetN uint64
	numeric bool // target parsed as an integer
	done    chan struct{}
	closed  bool
}

func newCaughtUp() *caughtUp { return &caughtUp{done: make(chan struct{})} }

// setTarget records the consistent read's resourceVersion; current is the
// store's resourceVersion at this moment.
func (c *caughtUp) setTarget(target string, current func() string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known, c.target = true, target
	n, err := strconv.ParseUint(target, 10, 64)
	c.targetN, c.numeric = n, err == nil
	if c.numeric {
		if cur, err := strconv.ParseUint(current(), 10, 64); err == nil && cur >= n {
			c.finishLocked()
		}
	}
}

// applied is called after each delta the store applied, with the store's
// resourceVersion.
func (c *caughtUp) applied(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known || c.closed {
		return
	}
	if !c.numeric {
		c.finishLocked()
		return
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n >= c.targetN {
		c.finishLocked()
	}
}

func (c *caughtUp) finishLocked() {
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// consistentRead lists one object at resourceVersion "" (a quorum read: the
// newest state) and returns the list's resourceVersion. It costs the
// apiserver one request returning at most one object.
func consistentRead(ctx context.Context, lw cache.ListerWatcher) (string, error) {
	list, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "", Limit: 1})
	if err != nil {
		return "", err
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		return "", fmt.Errorf("reading the list's resourceVersion: %w", err)
	}
	return acc.GetResourceVersion(), nil
}

// waitCaughtUp takes the consistent read, retrying with backoff while it
// fails, and hands its resourceVersion to s.caught. It returns when it has
// or ctx ended.
func (s *Informer) waitCaughtUp(ctx context.Context) {
	s.retry(ctx, func() error {
		rv, err := consistentRead(ctx, s.listerWatcher)
		if err != nil {
			return fmt.Errorf("boltinformer: collection %q: the consistent read the caught-up sync waits for failed (%w); the informer is not synced until it succeeds, retrying", s.name, err)
		}
		s.caught.setTarget(rv, s.store.LastStoreSyncResourceVersion)
		return nil
	})
}
