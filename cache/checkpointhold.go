package cache

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// The work a restart owes goes before the walk. A warm start with no start
// handler walks the stored collection only to verify its index entries. With
// an unbounded cache, the walk also fills it (delivery.go). Nothing waits
// for that walk but what makes it go on at once. Index lookups, resyncs and
// relists do that. A checkpoint's handler joins such an informer late.
// controller-runtime adds a controller's handler once the caches have
// synced. The handler is given only what it has not acknowledged, the work
// the restart owes. Decoding the whole collection beside that work takes
// the cores it needs. So each checkpoint open when such a start begins holds
// the walk back. The hold ends when the handler has joined and acknowledged
// every key it was given at the join. It also ends when the checkpoint is
// closed, or when walkHoldLimit has passed.

// walkHoldLimit bounds how long a checkpoint holds the walk back. Its
// handler may never join. It may also never acknowledge some key, when a
// reconcile keeps failing.
const walkHoldLimit = time.Minute

// owedHold is a checkpoint's hold on a warm start's walk. Its methods may
// be called on a nil owedHold, which is no hold, and then do nothing.
type owedHold struct {
	release func() // the walk hold's release, called once by end
	timer   *time.Timer

	mu     sync.Mutex
	joined bool
	owed   map[string]struct{}
}

// newOwedHold holds the walk (hold is warmDelivery.yield.hold) until the
// hold ends.
func newOwedHold(hold func() (release func())) *owedHold {
	h := &owedHold{release: sync.OnceFunc(hold())}
	h.timer = time.AfterFunc(walkHoldLimit, h.end)
	return h
}

// join records the keys the checkpoint's handler was given as it joined.
// The hold ends if there are none, or if they are unknown (nil, known false).
func (h *owedHold) join(keys []string, known bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.joined = true
	h.owed = make(map[string]struct{}, len(keys))
	for _, k := range keys {
		h.owed[k] = struct{}{}
	}
	done := !known || len(h.owed) == 0
	h.mu.Unlock()
	if done {
		h.end()
	}
}

// settle records that key was acknowledged. The hold ends once every key
// given at the join was acknowledged.
func (h *owedHold) settle(key string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.owed, key)
	done := h.joined && len(h.owed) == 0
	h.mu.Unlock()
	if done {
		h.end()
	}
}

// end lets the walk go on, as far as this hold is concerned.
func (h *owedHold) end() {
	if h == nil {
		return
	}
	h.timer.Stop()
	h.release()
}

// owedKeys returns the keys a checkpoint's joining handler is given. They
// are its initial adds (items) and the tombstones of cps.
func owedKeys(items []interface{}, cps []*Checkpoint) []string {
	keys := make([]string, 0, len(items))
	for _, it := range items {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(it); err == nil {
			keys = append(keys, k)
		}
	}
	return slices.AppendSeq(keys, maps.Keys(checkpointTombstones(cps)))
}

// holdWalk has each checkpoint open at a warm start with no start handler
// hold the walk back (see the comment at the top of the file).
func holdWalk(d *warmDelivery, cps []*Checkpoint) {
	if len(d.listeners) > 0 {
		return // The walk hands out to them, so there is nothing to hold.
	}
	for _, c := range cps {
		c.walk.Store(newOwedHold(d.yield.hold))
	}
}
