package cache

import (
	"strconv"
	"sync"

	"github.com/boltinformer/boltinformer/reflector"
)

// readiness is what decides when an informer has synced: its initial
// state loaded, and a warm start caught up with the server.
type readiness struct {
	// loaded is closed once the initial state (listed, or opened from
	// disk) is in the store; synced once caught is done too.
	loaded, synced chan struct{}
	// caught is done once a warm start has caught up with the server (see
	// InformerOptions.SyncedAtOpen); at once for a cold start or with
	// SyncedAtOpen.
	caught *caughtUp
	// proof, if set, is the consistent metadata list by which this start
	// also proves itself caught up (versionproof.go). Set by begin.
	proof *proofList
}

// caughtUp tracks a warm start's catching up (InformerOptions.SyncedAtOpen
// unset): it is done once the store has applied a resourceVersion at least
// that of a consistent read taken when the informer started. The read is
// taken, and the watches kept short meanwhile, by the reflector (see
// reflector.CatchUp).
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
	// match, while set, is a proof by versions under way (versionproof.go).
	match *versionMatch
	// replaying: a proof by versions held at replayedThrough, and the
	// watch's events up to it are dropped (skipReplayed).
	replaying       bool
	replayedThrough uint64
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

// finish marks the informer caught up without a target: a cold start (its
// list is the read), or SyncedAtOpen.
func (c *caughtUp) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishLocked()
}

// catchUp returns the reflector.CatchUp of a reflector started while the
// informer has not caught up: it takes the consistent read unless an
// earlier reflector did. Nil once caught up.
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
