package cache

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Controller unit tests seed an informer's listers before it runs. They
// call informer.GetIndexer().Add(obj), and then a lister built on
// GetIndexer finds obj. With client-go that works because the store is the
// indexer. A persistent informer's stored state may not be served before
// Run has checked its provenance. It may come from another cluster or
// another list. Until then GetStore and GetIndexer serve a seed store
// instead. The seed store is client-go's in-memory indexer with the
// informer's indexers, empty unless written to. Whatever is written there
// reads back as it would from client-go's.
//
// When Run has checked the provenance, it adopts the seed store. It does so
// under mu, so that no write falls between the two stores.
//
//   - If nothing was written, the collection is served as stored.
//   - If something was written, the informer starts cold. The seeded
//     objects are not the cluster's. The stored state then no longer is
//     what the file holds plus nothing. The collection's objects and
//     resourceVersion are emptied, and it then holds exactly the seeded
//     objects. The first list replaces them as client-go's first list
//     replaces a seeded indexer. Seeded objects the list lacks reach
//     handlers as DeletedFinalStateUnknown, and those it has as updates.

// seedStore is what an informer's store serves until Run adopts it.
type seedStore struct {
	// mu is held for reading by every call served from store. adopt holds
	// it for writing, so that nothing is written to store once its contents
	// have been copied.
	mu    sync.RWMutex
	store storeIndexer // nil once adopted
	// written is set by the first write to store.
	written atomic.Bool
	// adopted is set under mu once the informer's store serves instead.
	adopted atomic.Bool
	// seeded says adopt found objects written, so the informer starts cold
	// with them. adopt writes it, and the informer's start reads it after.
	seeded bool
}

func newSeedStore(indexers cache.Indexers) *seedStore {
	own := cache.Indexers{} // client-go's AddIndexers cannot add to a nil map
	maps.Copy(own, indexers)
	return &seedStore{store: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, own).(storeIndexer)}
}

// fromSeeds runs fn on the seed store if it still serves, and reports
// whether it did. write marks the store written.
func fromSeeds[T any](s *seedStore, write bool, fn func(storeIndexer) T) (T, bool) {
	var zero T
	if s.adopted.Load() {
		return zero, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.store == nil {
		return zero, false
	}
	if write {
		s.written.Store(true)
	}
	return fn(s.store), true
}

// openStore makes the informer's store serve the collection, whose
// provenance has just been checked. It adopts what was written to the seed
// store (see above). The collection may owe a list, when a read error set
// part of it aside and no list was applied since. Then openStore makes
// listers wait for that list. Listers read the collection from its return
// on.
func (s *Informer) openStore(ctx context.Context) {
	seeds := s.gate.seeds
	seeds.mu.Lock()
	defer seeds.mu.Unlock()
	objs := seeds.store.List()
	written := seeds.written.Load()
	seeds.store = nil
	if written {
		seeds.seeded = true
		klog.FromContext(ctx).Info("Objects were written to the informer's store before it ran; it starts cold, with them in the store until its first list replaces them (as client-go's informer does), and does not resume the stored collection",
			"collection", s.name, "objects", len(objs))
		if err := s.persistent.coll.Reset(ctx, s.persistent.coll.Provenance()); err != nil {
			s.report(ctx, fmt.Errorf("boltinformer: collection %q: emptying it to start cold with the objects written before Run: %w", s.name, err))
		}
		if err := s.persistent.Replace(objs, ""); err != nil {
			s.report(ctx, fmt.Errorf("boltinformer: collection %q: storing the objects written before Run: %w; the informer starts cold without them", s.name, err))
		}
	}
	s.persistent.onList(s.listApplied)
	if dropped := s.persistent.coll.DroppedCheckpoints(); len(dropped) > 0 {
		klog.FromContext(ctx).Info("Dropped checkpoints no handler had opened for the retention period (persist.Options.CheckpointRetention), with their acknowledgements and tombstones", "collection", s.name, "checkpoints", dropped)
		s.opts.Metrics.countDroppedCheckpoints(s.name, len(dropped))
	}
	// Stored state persist set aside at open, instead of resuming it, is
	// reported and counted as a read error is.
	coll := s.persistent.coll
	if err := coll.DamageSetAside(); err != nil {
		s.report(ctx, fmt.Errorf("boltinformer: collection %q: %w; it was emptied, and the informer starts cold", s.name, err))
		s.opts.Metrics.countReset(s.name, resetReadError)
	}
	if err := coll.JournalSetAside(); err != nil {
		s.report(ctx, fmt.Errorf("boltinformer: collection %q: %w; it was set aside, listing before the informer is synced", s.name, err))
		s.opts.Metrics.countReset(s.name, resetReadError)
	}
	if err := coll.RecordsSetAside(); err != nil {
		s.report(ctx, fmt.Errorf("boltinformer: collection %q: building an index: %w; the records were set aside, listing before the informer is synced", s.name, err))
		s.opts.Metrics.countReset(s.name, resetReadError)
	}
	if s.persistent.coll.MustList() {
		klog.FromContext(ctx).Info("The stored collection owes a list (objects were set aside after a read error, or a recovery did not finish); listing before it is synced", "collection", s.name)
		s.gate.owe()
	}
	seeds.adopted.Store(true)
}
