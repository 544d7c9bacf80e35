package cache

import (
	"context"
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/recovery"
)

// A warm start is synced once its store has caught up with a consistent
// read taken after the start (caughtup.go). The resumed watch proves that
// when it passes the read's resourceVersion, which on a quiet resource
// takes the apiserver's bookmark, about a second whatever the collection's
// size. A small collection (InformerOptions.WarmListBelow) is proved
// sooner by its versions: the informer takes a consistent metadata list,
// the collection's (UID, resourceVersion) by key at one resourceVersion X,
// and is caught up as soon as the store holds exactly those versions — at
// once if nothing changed while the process was down, or once the watch
// has replayed what did.
//
// Why equal versions mean caught up with X: the watch applies the
// collection's states in revision order, S(r) for growing r. Every object
// of S(r) has a resourceVersion ≤ r, and a change at revision v in (r, X]
// leaves its object in S(X) at a resourceVersion ≥ v > r, or takes it out
// of S(X) (a deletion, or a label change out of the selectors) while S(r)
// has it. So S(r) = S(X) means no change in (r, X] to an object of either:
// the store reflects the read at X. The only events in (r, X] are of
// objects created and gone again within it, in neither state. The watch
// goes on from r and replays them after the proof: applied, they would
// show the store, synced, holding objects gone before X, and tell handlers
// of them, which a list at X never would. So the informer drops the
// replayed events up to X (skipReplayed). Handlers see every other event
// the watch replays, as with the bookmark.
//
// A small collection whose stored resourceVersion has expired (410) also
// recovers (recoverysteps.go); its recovery takes the proof's list as its own
// metadata list (recovery.Hooks.Listed), so the collection is listed
// once, not twice.
//
// Anything the deltas do not describe one key at a time — a recovery, a
// delta the store failed to apply — drops the proof, and the bookmark (or
// the recovery) is left to decide, so a mistake can only make the start
// wait as long as it does without the list.

// versionMatch is the proof in progress, guarded by caughtUp.mu.
type versionMatch struct {
	want   map[string]recovery.Version // the consistent list's, by key
	differ map[string]struct{}         // keys where the store differs from want
	// at is the list's resourceVersion X, if it is an integer (numeric).
	at      uint64
	numeric bool
}

// startMatch begins the proof with the listed versions, read at
// resourceVersion at, and the store's (taken under blockDeltas, so that
// every delta applied later reaches appliedDeltas). Done at once if they
// are equal.
func (c *caughtUp) startMatch(want, stored map[string]recovery.Version, at string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	m := &versionMatch{want: want, differ: map[string]struct{}{}}
	m.at, m.numeric = parseVersion(at)
	for key, v := range want {
		if stored[key] != v {
			m.differ[key] = struct{}{}
		}
	}
	for key := range stored {
		if _, ok := want[key]; !ok {
			m.differ[key] = struct{}{}
		}
	}
	if len(m.differ) == 0 {
		c.provedLocked(m)
		return
	}
	c.match = m
}

// provedLocked ends the proof m, which holds: the informer is caught up,
// and the watch's replay up to m's resourceVersion is dropped from here on
// (skipReplayed). Called with c.mu held.
func (c *caughtUp) provedLocked(m *versionMatch) {
	c.match = nil
	if m.numeric {
		c.replaying, c.replayedThrough = true, m.at
	}
	c.finishLocked()
}

// skipReplayed returns deltas without the resumed watch's events up to the
// resourceVersion a proof by versions held at: they are of objects
// created and gone again before it (see the comment at the top of the
// file). The first event or bookmark past it ends the replay, and so does
// a relist (a recovery step, a Replace), whose writes are never dropped.
// deltas is not modified. Called under blockDeltas.
func (c *caughtUp) skipReplayed(deltas []cache.Delta) []cache.Delta {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.replaying {
		return deltas
	}
	var out []cache.Delta
	for i, d := range deltas {
		drop := false
		switch {
		case d.Type == cache.ReplacedAll || isRecoveryStep(d):
			c.replaying = false
		case d.Type == cache.Bookmark:
			if b, ok := d.Object.(cache.BookmarkInfo); ok {
				if n, ok := parseVersion(b.ResourceVersion); ok && n >= c.replayedThrough {
					c.replaying = false
				}
			}
		case d.Type == cache.Added || d.Type == cache.Updated || d.Type == cache.Deleted:
			acc, err := meta.Accessor(d.Object)
			if err != nil {
				c.replaying = false
				break
			}
			if n, ok := parseVersion(acc.GetResourceVersion()); ok && n <= c.replayedThrough {
				drop = true
			} else {
				c.replaying = false
			}
		}
		switch {
		case drop && out == nil:
			out = append(make([]cache.Delta, 0, len(deltas)), deltas[:i]...)
		case !drop && out != nil:
			out = append(out, d)
		}
		if !c.replaying {
			if out == nil {
				return deltas
			}
			return append(out, deltas[i+1:]...)
		}
	}
	if out == nil {
		return deltas
	}
	return out
}

// parseVersion reads a resourceVersion as an etcd revision.
func parseVersion(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// appliedDeltas follows the proof through deltas the store applied
// without error. Called under blockDeltas.
func (c *caughtUp) appliedDeltas(deltas []cache.Delta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.match
	if m == nil || c.closed {
		return
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Bookmark, cache.ReplacedAll, cache.SyncAll:
			continue // no object changes
		}
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
		if err != nil {
			c.match = nil
			return
		}
		var now recovery.Version
		has := d.Type != cache.Deleted
		if has {
			acc, err := meta.Accessor(d.Object)
			if err != nil {
				c.match = nil
				return
			}
			now = recovery.Version{UID: acc.GetUID(), ResourceVersion: acc.GetResourceVersion()}
		}
		if want, listed := m.want[key]; listed == has && want == now {
			delete(m.differ, key)
		} else {
			m.differ[key] = struct{}{}
		}
	}
	if len(m.differ) == 0 {
		c.provedLocked(m)
	}
}

// dropMatch abandons the proof.
func (c *caughtUp) dropMatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.match = nil
}

// matchesVersions reports whether a warm start should also prove itself
// caught up by versions: it resumes, waits to catch up (no SyncedAtOpen),
// can list metadata (Recovery), and holds fewer objects than WarmListBelow.
// Called with life.mu held, once the start's resume version is known.
func (s *Informer) matchesVersions(resume string) bool {
	below := s.opts.WarmListBelow
	if below == 0 {
		below = DefaultWarmListBelow
	}
	if resume == "" || below < 0 || s.opts.SyncedAtOpen || s.persistent == nil || s.persistent.InMemory() ||
		s.opts.Recovery == nil {
		return false
	}
	n, err := s.persistent.coll.Len()
	return err == nil && n < below
}

// proofList is the proof's consistent metadata list, handed once to a
// recovery that wants one (recovery.Hooks.Listed).
type proofList struct {
	done  chan struct{} // closed once list is set, or the list failed
	list  *recovery.Listing
	taken atomic.Bool
}

func newProofList() *proofList { return &proofList{done: make(chan struct{})} }

// take returns the list, waiting for it while it is being taken; nil if
// the list failed or was taken before.
func (p *proofList) take(ctx context.Context) *recovery.Listing {
	if !p.taken.CompareAndSwap(false, true) {
		return nil
	}
	select {
	case <-p.done:
		return p.list
	case <-ctx.Done():
		return nil
	}
}

// proveByVersions takes the consistent metadata list and starts the proof.
// A failed list is logged and leaves the start to the bookmark.
func (s *Informer) proveByVersions(ctx context.Context) {
	logger := klog.FromContext(ctx)
	list, err := recovery.ListVersions(ctx, s.opts.Recovery.Lister)
	s.ready.proof.list = list
	close(s.ready.proof.done)
	if err != nil {
		if ctx.Err() == nil {
			logger.V(2).Info("Warm start: the consistent metadata list failed; catching up by the watch alone", "collection", s.name, "err", err)
		}
		return
	}
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	if s.recovery.active.Load() || s.persistent.InMemory() {
		return
	}
	versions, err := s.persistent.coll.Versions()
	if err != nil {
		logger.V(2).Info("Warm start: reading the stored versions failed; catching up by the watch alone", "collection", s.name, "err", err)
		return
	}
	stored := make(map[string]recovery.Version, len(versions))
	for k, v := range versions {
		stored[k] = recovery.Version{UID: v.UID, ResourceVersion: v.ResourceVersion}
	}
	s.ready.caught.startMatch(list.Versions, stored, list.ResourceVersion)
}
