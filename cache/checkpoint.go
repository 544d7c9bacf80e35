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
// it had already finished processing before the restart: the program
// acknowledges an object (key and resourceVersion) once it has fully
// processed it, and on the next start the handler gets no initial add for an
// object whose stored resourceVersion is the one it acknowledged. It gets
// everything else exactly as without a checkpoint: initial adds of objects
// changed or created while it was down or since its last acknowledgement,
// every watch event (updates, deletions), a relist's changes and
// deletions, and resyncs. A relist's update of an object whose
// resourceVersion did not change is skipped too where the handler
// acknowledged it at that version (client-go gives such updates to every
// handler with a resync period until its first resync check; after a 410
// they would be a storm of every object). Its
// registration's HasSynced means what it means without a checkpoint, over
// the adds it is given.
//
// Deletions: an acknowledged object that is deleted leaves a tombstone (its
// last state) until the deletion is acknowledged (Ack with what OnDelete was
// given, or AckDeleted). A handler that joins after the deletion was applied
// — registered after the informer started, as controller-runtime's are — is
// given the tombstone as a cache.DeletedFinalStateUnknown once it has
// joined, so a deletion made while the program was down is never missed;
// without a checkpoint the initial adds of the survivors would have
// revealed it. While the store owes a list (a warm start set unreadable
// state aside, or found the collection marked must-list) tombstones are
// given once that list is applied, and only of keys it did not bring back:
// an acknowledged object set aside leaves a tombstone too, but is deleted
// only if the list lacks it.
//
// Acknowledgements live in the cache file beside the objects and reach it
// with the group commit: delivery is at least once (a crash between
// processing and the commit delivers the object, or the deletion, again). They are dropped
// with the stored objects whenever the collection starts over (another
// cluster, list, or transform; a reset), kept across a relist only where an
// object's resourceVersion did not change (another version never matches),
// dropped with a deleted object, and never shared between checkpoint names.
//
// What a checkpoint keeps is bounded. A checkpoint no handler has opened
// for persist.Options.CheckpointRetention of the time its collection was in
// use (7 days by default; downtime does not count, and an open one is
// stamped hourly) is dropped when the file is next opened, logged and
// counted (boltinformer_checkpoints_dropped_total): that is how the
// checkpoint of a renamed or removed handler goes away. A handler that
// leaves more than persist.Options.MaxTombstones deletions unacknowledged
// (10,000 by default: one that acknowledges adds and updates but never
// deletions) has its checkpoint cleared instead of growing it, reported
// and counted (boltinformer_checkpoint_overflows_total).
//
// A cleared or dropped checkpoint is as if the handler had never
// acknowledged anything. So is every checkpoint of a collection that starts
// cold: another cluster, list or transform; Reset; a SetAsideAll after the
// stored keys could not be read; a cold list stopped part-way; an informer
// moved to memory. The handler is given every object again. It is told of
// no deletion made before, not even one it had not acknowledged yet, as a
// cold-starting client-go informer is not. A
// collection that relists without starting cold (410, a read error that
// set part of it aside) keeps its checkpoints and their tombstones.
//
// Do not use a checkpoint for a handler that must look at every object on
// every start: one that re-checks state outside the cluster (cloud
// resources, a DNS zone), or one whose processing depends on other objects
// or on configuration that may have changed while it was down. Clear it (or
// change its name) when the handler's logic changes what processing an
// object means. Acknowledgements cost about 100 bytes of memory per key.
type Checkpoint struct {
	inf *Informer
	cp  *persist.Checkpoint

	mu         sync.Mutex
	registered bool

	skipped, skippedRelisted atomic.Int64
	// walk holds a warm start's walk back until the work owed to the
	// handler is acknowledged (checkpointhold.go); nil: no hold.
	walk atomic.Pointer[owedHold]
}

// ErrNoCheckpoints is returned by Checkpoint for an informer without a cache
// file.
var ErrNoCheckpoints = errors.New("checkpoints need a persistent informer (one with a cache file)")

// Checkpoint opens the named checkpoint of the informer's collection. Open it,
// and add its handler, before the informer starts, so that the handler's
// initial adds come from the warm start (a handler added later gets the
// store's contents as client-go gives them to a late handler, minus the
// acknowledged ones). A name is open once per collection at a time.
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

// checkpointSet is an informer's open checkpoints: metrics read them, and a
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
// client-go interface (from a factory, say); it fails for an informer that
// is not a boltinformer one.
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
// checkpoint: two handlers sharing acknowledgements would skip each other's
// work.
var ErrCheckpointHasHandler = errors.New("the checkpoint already has a handler: one checkpoint per handler")

// AddEventHandlerWithTombstones is AddEventHandlerWithOptions that also gives
// the handler the tombstones of others, more checkpoints of the same
// informer (see Informer.AddEventHandlerWithTombstones): for adapters whose
// handler is the consumer of several checkpoints.
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
// it queues the add, before any later change to the object is applied (a
// deletion would drop the acknowledgement).
func (c *Checkpoint) skip(obj interface{}) bool {
	if c.Acknowledged(obj) {
		c.skipped.Add(1)
		return true
	}
	return false
}

// skipRelisted drops a relist's update of an object whose resourceVersion
// the relist did not change, if the handler acknowledged it at that
// version: the handler has processed exactly this state. Asked as the
// update is queued, like skip. Resyncs are not asked about.
func (c *Checkpoint) skipRelisted(obj interface{}) bool {
	if c.Acknowledged(obj) {
		c.skippedRelisted.Add(1)
		return true
	}
	return false
}

// joinList returns the store's objects for a handler joining the started
// informer: for a checkpoint's handler (skip), only those it has not
// acknowledged (unacknowledged true), read without decoding the acknowledged ones where the store
// is the file, so that a handler joining a large collection pays for what
// changed. Where that cannot be had (the seed store still serves, the
// collection went on in memory, a read failed) it is the whole list, which
// the listener's skip filters as it queues. Called under blockDeltas.
//
// It never waits for a list the store owes (readgate.go): that list can
// only be applied by the delta loop, which blockDeltas holds up. The joining
// handler gets what the store holds, and the rest through the list (see
// Informer.addEventHandler). The read is one consistent view of the
// collection: a set-aside running beside it lands wholly before or after.
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

// Acknowledged reports whether obj, at its resourceVersion, is acknowledged:
// an initial add of it is what the checkpoint's handler skips. For adapters
// that filter elsewhere (a controller-runtime predicate).
func (c *Checkpoint) Acknowledged(obj interface{}) bool {
	key, rv, err := c.keyAndVersion(obj)
	if err != nil || rv == "" {
		return false
	}
	acked, ok := c.cp.Acked(key)
	return ok && acked == rv
}

// Ack acknowledges obj at its resourceVersion: the program has finished
// processing this state of it. Call it with the object the handler was given
// (or one read from the informer's store), once the work it implies is done;
// in OnDelete, with what OnDelete was given (an object or a
// cache.DeletedFinalStateUnknown), which acknowledges the deletion. An
// acknowledgement of a state older than a deletion applied since (a
// handler still finishing an update when the object was deleted) settles
// nothing: the deletion is still delivered until it is acknowledged itself.
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

// AckDeleted acknowledges the deletion of the object at key: its tombstone is
// dropped, and no later start gives the deletion again.
func (c *Checkpoint) AckDeleted(key string) error {
	c.walk.Load().settle(key) // the work is done, whether the write is
	if err := c.cp.AckDeleted(key); err != nil {
		return fmt.Errorf("boltinformer: checkpoint %q of %q: acknowledging the deletion of %s: %w", c.Name(), c.inf.name, key, err)
	}
	return nil
}

// checkpointTombstones returns the tombstones of cps: each deleted key,
// once, with the object's last stored state.
func checkpointTombstones(cps []*Checkpoint) map[string]runtime.Object {
	deleted := map[string]runtime.Object{}
	for _, c := range cps {
		maps.Copy(deleted, c.cp.Deleted())
	}
	return deleted
}

// tombstoneNotifications returns, for each tombstone of cps whose key the
// store does not hold, the deletion a joining handler is given: a
// cache.DeletedFinalStateUnknown carrying the object's last stored state, as
// client-go gives a deletion the informer did not see happen. A key in
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
			continue // recreated: its initial add (or skip) stands for it
		}
		out = append(out, processor.DeleteNotification{Obj: cache.DeletedFinalStateUnknown{Key: key, Obj: deleted[key]}})
	}
	return out
}

// storeLacks returns a test of whether store surely lacks a key: a key
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
	c.walk.Load().settle(key) // the work is done, whether the write is
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

// Clear drops every acknowledgement: on its next start the handler gets every
// stored object again. (`inspect checkpoints --clear` does it offline.)
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
