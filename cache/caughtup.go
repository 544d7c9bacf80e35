package cache

import (
	"strconv"
	"sync"

	"github.com/boltinformer/boltinformer/reflector"
)

// readiness is what decides when an informer has synced. Its initial state
// must be loaded, and a warm start must have caught up with the server.
type readiness struct {
	// loaded is closed once the initial state is in the store, listed or
	// opened from disk. synced is closed once caught is done too.
	loaded, synced chan struct{}
	// caught is done once a warm start has caught up with the server (see
	// InformerOptions.SyncedAtOpen). It is done at once for a cold start or
	// with SyncedAtOpen.
	caught *caughtUp
	// proof, if set, is the consistent metadata list by which this start
	// also proves itself caught up (versionproof.go). begin sets it.
	proof *proofList
}

// caughtUp tracks a warm start's catching up, with
// InformerOptions.SyncedAtOpen unset. It is done once the store has applied
// a resourceVersion at least that of a consistent read taken when the
// informer started. The reflector takes the read and keeps the watches short
// meanwhile (see reflector.CatchUp).
//
// resourceVersions are opaque to clients. Those of an etcd-backed apiserver
// are etcd revisions, unsigned integers that grow with every write. A list's
// resourceVersion is the revision it was read at. The apiserver's watch
// cache compares them the same way, as integers. The read's or the applied
// resourceVersion may not parse as an unsigned integer, with another storage
// behind the apiserver. Then nothing can be compared, and the first event or
// bookmark applied after the read counts. The watch delivers in order. So
// that event follows everything the read saw only if the server sent it
// after the read. That is the best an opaque version allows.
type caughtUp struct {
	mu      sync.Mutex
	known   bool   // the read returned; target is set
	target  string // the read's resourceVersion
	targetN uint64
	numeric bool // target parsed as an integer
	done    chan struct{}
	closed  bool
	// match, while set, is a proof by versions under way (versionproof.go).
	match *versionMatch
	// replaying says a proof by versions held at replayedThrough. The
	// watch's events up to it are dropped (skipReplayed).
	replaying       bool
	replayedThrough uint64
}

func newCaughtUp() *caughtUp { return &caughtUp{done: make(chan struct{})} }

// setTarget records the consistent read's resourceVersion. current returns
// the store's resourceVersion at this moment.
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

// finish marks the informer caught up without a target. A cold start needs
// none, since its list is the read. SyncedAtOpen needs none either.
func (c *caughtUp) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishLocked()
}

// catchUp returns the reflector.CatchUp of a reflector started while the
// informer has not caught up. That reflector takes the consistent read
// unless an earlier reflector did. catchUp returns nil once caught up.
func (s *Informer) catchUp() *reflector.CatchUp {
	c := s.ready.caught
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	cu := &reflector.CatchUp{Done: c.done}
	if !c.known {
		cu.Target = func(rv string) { c.setTarget(rv, s.appliedResourceVersion) }
	}
	return cu
}
