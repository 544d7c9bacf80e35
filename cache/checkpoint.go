package cache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/processor"
)

// Checkpoint lets one event handler skip, on a warm start, the stored objects
// it had already finished processing before the restart. The program
// acknowledges an object (key and resourceVersion) once it has fully
// processed it. On the next start, the handler gets no initial add for an
// object whose stored resourceVersion is the one it acknowledged. It gets
// everything else exactly as without a checkpoint. That is initial adds of
// objects changed or created while it was down or since its last
// acknowledgement. It is also every watch event (updates, deletions), a
// relist's changes and deletions, and resyncs. A relist's update of an
// object whose resourceVersion did not change is skipped too, where the
// handler acknowledged it at that version. client-go gives such updates to
// every handler with a resync period until its first resync check. After a
// 410 they would be a storm of every object. The registration's HasSynced
// means what it means without a checkpoint, over the adds it is given.
//
// An acknowledged object that is deleted leaves a tombstone, its last
// state. The tombstone stays until the deletion is acknowledged, by Ack
// with what OnDelete was given or by AckDeleted. A handler may join after
// the deletion was applied, registered after the informer started as
// controller-runtime's are. It is given the tombstone as a
// cache.DeletedFinalStateUnknown once it has joined. So a deletion made
// while the program was down is never missed. Without a checkpoint, the
// initial adds of the survivors would have revealed it. The store may owe a
// list, when a warm start set unreadable state aside or found the
// collection marked must-list. Tombstones are then given once that list is
// applied, and only of keys it did not bring back. An acknowledged object
// set aside leaves a tombstone too, but is deleted only if the list lacks
// it.
//
// Acknowledgements live in the cache file beside the objects. They reach it
// with the group commit, so delivery is at least once. A crash between
// processing and the commit delivers the object, or the deletion, again.
// Acknowledgements are dropped with the stored objects whenever the
// collection starts over. Another cluster, list or transform, or a reset,
// starts it over. They are kept across a relist only where an object's
// resourceVersion did not change, since another version never matches. They
// are dropped with a deleted object. They are never shared between
// checkpoint names.
//
// What a checkpoint keeps is bounded. A checkpoint no handler has opened for
// persist.Options.CheckpointRetention of the time its collection was in use
// is dropped when the file is next opened. The retention is 7 days by
// default. Downtime does not count, and an open checkpoint is stamped
// hourly. The drop is logged and counted
// (boltinformer_checkpoints_dropped_total). That is how the checkpoint of a
// renamed or removed handler goes away. A handler may leave more than
// persist.Options.MaxTombstones deletions unacknowledged, 10,000 by
// default. It may acknowledge adds and updates but never deletions, for
// example. Its checkpoint is then cleared instead of growing. The clearing
// is reported and counted (boltinformer_checkpoint_overflows_total).
//
// A cleared or dropped checkpoint is as if the handler had never
// acknowledged anything. So is every checkpoint of a collection that starts
// cold. Another cluster, list or transform starts it cold. So do Reset, a
// SetAsideAll after the stored keys could not be read, a cold list stopped
// part-way, and an informer moved to memory. The handler is given every
// object again. It is told of no deletion made before, not even one it had
// not acknowledged yet. A cold-starting client-go informer is not told of
// one either. A collection may relist without starting cold, after a 410 or
// a read error that set part of it aside. It keeps its checkpoints and
// their tombstones.
//
// Do not use a checkpoint for a handler that must look at every object on
// every start. One such handler re-checks state outside the cluster, such
// as cloud resources or a DNS zone. Another's processing depends on other
// objects, or on configuration that may have changed while it was down.
// Clear the checkpoint, or change its name, when the handler's logic
// changes what processing an object means. Acknowledgements cost about 100
// bytes of memory per key.
type Checkpoint struct {
	inf *Informer
	cp  *persist.Checkpoint

	mu         sync.Mutex
	registered bool

	skipped, skippedRelisted atomic.Int64
	// walk holds a warm start's walk back until the work owed to the
	// handler is acknowledged (checkpointhold.go). Nil means no hold.
	walk atomic.Pointer[owedHold]
}

// ErrNoCheckpoints is returned by Checkpoint for an informer without a cache
// file.
var ErrNoCheckpoints = errors.New("checkpoints need a persistent informer (one with a cache file)")

// Checkpoint opens the named checkpoint of the informer's collection. Open it,
// and add its handler, before the informer starts. The handler's initial
// adds then come from the warm start. A handler added later gets the
// store's contents as client-go gives them to a late handler, minus the
// acknowledged ones. A name is open once per collection at a time.
func (s *Informer) Checkpoint(name string) (*Checkpoint, error) {
	if s.persistent == nil {
		return nil, ErrNoCheckpoints
	}
	cp, err := s.persistent.coll.Checkpoint(name)
	if err != nil {
		return nil, fmt.Errorf("boltinformer: collection %q: %w", s.name, err)
	}
	c := &Checkpoint{inf: s, cp: cp}
	s.checkpoints.add(c)
	return c, nil
}

// openCheckpoints returns the informer's open checkpoints.
func (s *Informer) openCheckpoints() []*Checkpoint { return s.checkpoints.list() }

// checkpointSet is an informer's open checkpoints. Metrics read them, and a
// stop ends their walks' timers.
type checkpointSet struct {
	mu   sync.Mutex
	open map[*Checkpoint]struct{}
}

func (cs *checkpointSet) add(c *Checkpoint) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.open == nil {
		cs.open = map[*Checkpoint]struct{}{}
	}
	cs.open[c] = struct{}{}
}

func (cs *checkpointSet) remove(c *Checkpoint) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.open, c)
}

func (cs *checkpointSet) list() []*Checkpoint {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Collect(maps.Keys(cs.open))
}

// CheckpointOf is Informer.Checkpoint for an informer obtained as a
// client-go interface, from a factory say. It fails for an informer that is
// not a boltinformer one.
func CheckpointOf(informer cache.SharedIndexInformer, name string) (*Checkpoint, error) {
	s, ok := informer.(*Informer)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a boltinformer informer", ErrNoCheckpoints, informer)
	}
	return s.Checkpoint(name)
}

// Name returns the checkpoint's name.
func (c *Checkpoint) Name() string { return c.cp.Name() }

// AddEventHandler adds handler to the informer as the checkpoint's handler.
// A checkpoint has at most one handler.
func (c *Checkpoint) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return c.AddEventHandlerWithOptions(handler, cache.HandlerOptions{})
}

// AddEventHandlerWithOptions is AddEventHandler with client-go's handler
// options.
func (c *Checkpoint) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return c.AddEventHandlerWithTombstones(handler, options)
}

// ErrCheckpointHasHandler is returned for a second handler of one
// checkpoint. Two handlers sharing acknowledgements would skip each other's
// work.
var ErrCheckpointHasHandler = errors.New("the checkpoint already has a handler: one checkpoint per handler")

// AddEventHandlerWithTombstones is AddEventHandlerWithOptions that also gives
// the handler the tombstones of others, more checkpoints of the same
// informer (see Informer.AddEventHandlerWithTombstones). It is for adapters
// whose handler is the consumer of several checkpoints.
func (c *Checkpoint) AddEventHandlerWithTombstones(handler cache.ResourceEventHandler, options cache.HandlerOptions, others ...*Checkpoint) (cache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.registered {
		return nil, fmt.Errorf("checkpoint %q: %w", c.Name(), ErrCheckpointHasHandler)
	}
	reg, err := c.inf.addEventHandler(handler, options, c, append([]*Checkpoint{c}, others...))
	if err == nil {
		c.registered = true
	}
	return reg, err
}

// skip drops the initial add of an acknowledged object. The listener asks as
// it queues the add, before any later change to the object is applied. A
// deletion would drop the acknowledgement.
func (c *Checkpoint) skip(obj interface{}) bool {
	if c.Acknowledged(obj) {
		c.skipped.Add(1)
		return true
	}
	return false
}

// skipRelisted drops a relist's update of an object whose resourceVersion
// the relist did not change, if the handler acknowledged it at that
// version. The handler has then processed exactly this state. The listener
// asks as the update is queued, as for skip. Resyncs are not asked about.
func (c *Checkpoint) skipRelisted(obj interface{}) bool {
	if c.Acknowledged(obj) {
		c.skippedRelisted.Add(1)
		return true
	}
	return false
}

// joinList returns the store's objects for a handler joining the started
// informer. For a checkpoint's handler (skip), it returns only those the
// handler has not acknowledged (unacknowledged true). Where the store is
// the file, it reads them without decoding the acknowledged ones. A handler
// joining a large collection thus pays for what changed. Where that cannot
// be had, joinList returns the whole list, which the listener's skip
// filters as it queues. That is so while the seed store still serves, when
// the collection went on in memory, or when a read failed. It is called
// under blockDeltas.
//
// It never waits for a list the store owes (readgate.go). That list can
// only be applied by the delta loop, which blockDeltas holds up. The joining
// handler gets what the store holds, and the rest through the list (see
// Informer.addEventHandler). The read is one consistent view of the
// collection. A set-aside running beside it lands wholly before or after.
func (s *Informer) joinList(skip *Checkpoint) (list []interface{}, unacknowledged bool) {
	if skip == nil || s.persistent == nil || s.persistent.InMemory() || !s.gate.seeds.adopted.Load() {
		return s.store.List(), false
	}
	objs, acknowledged, err := skip.cp.Unacknowledged()
	if err != nil {
		return s.store.List(), false
	}
	skip.skipped.Add(int64(acknowledged))
	out := make([]interface{}, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out, true
}

// Acknowledged reports whether obj, at its resourceVersion, is acknowledged.
// The checkpoint's handler skips an initial add of such an object. It is
// for adapters that filter elsewhere, such as in a controller-runtime
// predicate.
func (c *Checkpoint) Acknowledged(obj interface{}) bool {
	key, rv, err := c.keyAndVersion(obj)
	if err != nil || rv == "" {
		return false
	}
	acked, ok := c.cp.Acked(key)
	return ok && acked == rv
}

// Ack acknowledges obj at its resourceVersion. It says the program has
// finished processing this state of it. Call it with the object the handler
// was given, or one read from the informer's store. Call it once the work
// the object implies is done. In OnDelete, call it with what OnDelete was
// given, an object or a cache.DeletedFinalStateUnknown. That acknowledges
// the deletion. A handler may still finish an update when the object was
// deleted. Its acknowledgement of a state older than the deletion settles
// nothing. The deletion is still delivered until it is acknowledged itself.
func (c *Checkpoint) Ack(obj interface{}) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return c.AckDeleted(d.Key)
	}
	key, rv, err := c.keyAndVersion(obj)
	if err != nil {
		return err
	}
	return c.AckKey(key, rv)
}

// AckDeleted acknowledges the deletion of the object at key. Its tombstone
// is dropped, and no later start gives the deletion again.
func (c *Checkpoint) AckDeleted(key string) error {
	c.walk.Load().settle(key) // The work is done, whether or not the write succeeds.
	if err := c.cp.AckDeleted(key); err != nil {
		return fmt.Errorf("boltinformer: checkpoint %q of %q: acknowledging the deletion of %s: %w", c.Name(), c.inf.name, key, err)
	}
	return nil
}

// checkpointTombstones returns the tombstones of cps. It returns each
// deleted key once, with the object's last stored state.
func checkpointTombstones(cps []*Checkpoint) map[string]runtime.Object {
	deleted := map[string]runtime.Object{}
	for _, c := range cps {
		maps.Copy(deleted, c.cp.Deleted())
	}
	return deleted
}

// tombstoneNotifications returns, for each tombstone of cps whose key the
// store does not hold, the deletion a joining handler is given. It is a
// cache.DeletedFinalStateUnknown carrying the object's last stored state.
// client-go gives a deletion the informer did not see happen so. A key in
// several checkpoints is given once. A key whose stored record cannot be
// read is held (storeLacks).
func tombstoneNotifications(store cache.Store, cps []*Checkpoint) []interface{} {
	deleted := checkpointTombstones(cps)
	keys := make([]string, 0, len(deleted))
	for k := range deleted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lacks := storeLacks(store)
	var out []interface{}
	for _, key := range keys {
		if !lacks(key) {
			continue // Recreated, so its initial add (or skip) stands for it.
		}
		out = append(out, processor.DeleteNotification{Obj: cache.DeletedFinalStateUnknown{Key: key, Obj: deleted[key]}})
	}
	return out
}

// storeLacks returns a test of whether store surely lacks a key. A key
// whose stored record cannot be read is held. Its reads do not wait for a
// warm start's walk, which may not have begun. The read is picked once.
func storeLacks(store cache.Store) func(key string) bool {
	get := store.GetByKey
	if i, ok := store.(*Indexer); ok {
		get = i.getOnce
	}
	return func(key string) bool {
		_, exists, err := get(key)
		return !exists && err == nil
	}
}

// AckKey acknowledges the object at key (the informer's store key) at
// resourceVersion rv.
func (c *Checkpoint) AckKey(key, rv string) error {
	c.walk.Load().settle(key) // The work is done, whether or not the write succeeds.
	if err := c.cp.Ack(key, rv); err != nil {
		return fmt.Errorf("boltinformer: checkpoint %q of %q: acknowledging %s at %s: %w", c.Name(), c.inf.name, key, rv, err)
	}
	return nil
}

// Skipped returns how many initial adds the checkpoint's handler was spared.
func (c *Checkpoint) Skipped() int64 { return c.skipped.Load() }

// SkippedRelisted returns how many of a relist's updates of unchanged,
// acknowledged objects the checkpoint's handler was spared.
func (c *Checkpoint) SkippedRelisted() int64 { return c.skippedRelisted.Load() }

// Len returns the number of acknowledged keys.
func (c *Checkpoint) Len() int { return c.cp.Len() }

// Tombstones returns the number of deletions of acknowledged objects the
// handler has not acknowledged.
func (c *Checkpoint) Tombstones() int { return c.cp.Tombstones() }

// Clear drops every acknowledgement. On its next start the handler gets
// every stored object again. `inspect checkpoints --clear` does it offline.
func (c *Checkpoint) Clear() error { return c.cp.Clear() }

// Close releases the name. Acknowledgements made before it are kept.
func (c *Checkpoint) Close() {
	c.walk.Load().end()
	c.cp.Close()
	c.inf.checkpoints.remove(c)
}

func (c *Checkpoint) keyAndVersion(obj interface{}) (key, rv string, err error) {
	if key, err = cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil {
		return "", "", err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", err
	}
	return key, m.GetResourceVersion(), nil
}
