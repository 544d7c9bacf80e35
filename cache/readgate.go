package cache

import (
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// readGate says what an informer's store may serve: the seed store (see
// seed.go) until the collection's provenance is checked; then the
// collection, except that index lookups wait while a warm start is still
// verifying the stored index entries, and reads that could show an object
// as absent wait while the store owes a list (owe, below).
type readGate struct {
	// verifying, while set, returns a channel closed once a warm start has
	// checked every stored index entry against the index functions, or
	// once the collection has closed. Index lookups wait for it: an entry
	// written by an older index function must never be served. A stop
	// ends the walk short of the check; lookups then fail as any read of
	// a closed collection does. Asking makes a held-back walk go on.
	verifying atomic.Pointer[func() <-chan struct{}]
	// verified closes verifying's channel; nil without a warm start.
	verified func()

	// seeds serves until the provenance is checked.
	seeds *seedStore

	// owedMu serializes owe, paid and stopOwing. owed is the list the
	// store owes, nil if none; owedGen counts owe calls, so a read can tell
	// a list became owed while it ran; waiters counts reads waiting.
	owedMu  sync.Mutex
	stopped bool // guarded by owedMu: the informer has stopped
	owed    atomic.Pointer[owedList]
	owedGen atomic.Uint64
	waiters atomic.Int64
}

// verifyIndexes makes index lookups wait until verified is called; d's
// walk is hurried along by every lookup that waits.
func (g *readGate) verifyIndexes(d *warmDelivery) {
	ch := make(chan struct{})
	g.verified = sync.OnceFunc(func() { close(ch) })
	end := func() <-chan struct{} {
		d.end()
		return ch
	}
	g.verifying.Store(&end)
}

// indexesVerified lets index lookups through: the walk has verified every
// stored index entry, or the collection has closed.
func (g *readGate) indexesVerified() {
	if g.verified != nil {
		g.verified()
		g.verifying.Store(nil)
	}
}

// waitIndexes blocks until stored index entries may be served.
func (g *readGate) waitIndexes() {
	end := g.verifying.Load()
	if end == nil {
		return
	}
	ch := (*end)()
	select {
	case <-ch:
		return
	default:
	}
	if indexLookupWaits != nil {
		indexLookupWaits()
	}
	<-ch
}

// indexLookupWaits, a test hook, is called as an index lookup starts
// waiting for the stored index entries to be verified.
var indexLookupWaits func()

// gatedStore is the store an informer hands out (GetStore, GetIndexer, and
// so every lister). Until the informer has checked the collection's
// provenance it serves the seed store — empty, as client-go's store before
// its first list, unless written to: what the file holds may come from
// another cluster or another list, and is only served once it is shown to
// be this informer's (or, if it is not, once it has been emptied). Once it
// is, objects are served at once; index lookups wait until the warm start
// has verified the stored index entries (see warmDelivery), and reads that
// could show an object as absent wait while the store owes a list.
type gatedStore struct {
	storeIndexer
	gate *readGate
}

func (p gatedStore) GetByKey(key string) (interface{}, bool, error) {
	type got struct {
		obj    interface{}
		exists bool
		err    error
	}
	read := func(s storeIndexer) got {
		obj, exists, err := s.GetByKey(key)
		return got{obj, exists, err}
	}
	if g, ok := fromSeeds(p.gate.seeds, false, read); ok {
		return g.obj, g.exists, g.err
	}
	gen := p.gate.owedGen.Load()
	if g := read(p.storeIndexer); g.exists || g.err != nil || (!p.gate.owes() && p.gate.owedGen.Load() == gen) {
		// Found: there whatever else is missing. Absent, with no list owed
		// before or during the read: absent.
		return g.obj, g.exists, g.err
	}
	g, err := whole(p.gate, func() got { return read(p.storeIndexer) })
	if err != nil {
		return nil, false, err
	}
	return g.obj, g.exists, g.err
}

func (p gatedStore) Get(obj interface{}) (interface{}, bool, error) {
	type got struct {
		obj    interface{}
		exists bool
		err    error
	}
	if g, ok := fromSeeds(p.gate.seeds, false, func(s storeIndexer) got {
		obj, exists, err := s.Get(obj)
		return got{obj, exists, err}
	}); ok {
		return g.obj, g.exists, g.err
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, cache.KeyError{Obj: obj, Err: err}
	}
	return p.GetByKey(key)
}

func (p gatedStore) List() []interface{} {
	if v, ok := fromSeeds(p.gate.seeds, false, storeIndexer.List); ok {
		return v
	}
	return mustWhole(p.gate, "List", p.storeIndexer.List)
}

func (p gatedStore) ListKeys() []string {
	if v, ok := fromSeeds(p.gate.seeds, false, storeIndexer.ListKeys); ok {
		return v
	}
	return mustWhole(p.gate, "ListKeys", p.storeIndexer.ListKeys)
}

func (p gatedStore) LastStoreSyncResourceVersion() string {
	if v, ok := fromSeeds(p.gate.seeds, false, storeIndexer.LastStoreSyncResourceVersion); ok {
		return v
	}
	return p.storeIndexer.LastStoreSyncResourceVersion()
}

// objectsOrErr is a lookup's result.
type objectsOrErr[T any] struct {
	v   T
	err error
}

// lookup serves an index lookup: from the seed store, or once the stored
// index entries are verified and no list is owed.
func lookup[T any](p gatedStore, fn func(storeIndexer) (T, error)) (T, error) {
	read := func(s storeIndexer) objectsOrErr[T] {
		v, err := fn(s)
		return objectsOrErr[T]{v, err}
	}
	if r, ok := fromSeeds(p.gate.seeds, false, read); ok {
		return r.v, r.err
	}
	p.gate.waitIndexes()
	r, err := whole(p.gate, func() objectsOrErr[T] { return read(p.storeIndexer) })
	if err != nil {
		var zero T
		return zero, err
	}
	return r.v, r.err
}

func (p gatedStore) Index(indexName string, obj interface{}) ([]interface{}, error) {
	return lookup(p, func(s storeIndexer) ([]interface{}, error) { return s.Index(indexName, obj) })
}

func (p gatedStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	return lookup(p, func(s storeIndexer) ([]string, error) { return s.IndexKeys(indexName, indexedValue) })
}

func (p gatedStore) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	return lookup(p, func(s storeIndexer) ([]interface{}, error) { return s.ByIndex(indexName, indexedValue) })
}

func (p gatedStore) ListIndexFuncValues(indexName string) []string {
	if v, ok := fromSeeds(p.gate.seeds, false, func(s storeIndexer) []string { return s.ListIndexFuncValues(indexName) }); ok {
		return v
	}
	p.gate.waitIndexes()
	return mustWhole(p.gate, "ListIndexFuncValues", func() []string { return p.storeIndexer.ListIndexFuncValues(indexName) })
}

// Writes go to the seed store until it is adopted, then to the informer's
// store.

func (p gatedStore) Add(obj interface{}) error {
	if err, ok := fromSeeds(p.gate.seeds, true, func(s storeIndexer) error { return s.Add(obj) }); ok {
		return err
	}
	return p.storeIndexer.Add(obj)
}

func (p gatedStore) Update(obj interface{}) error {
	if err, ok := fromSeeds(p.gate.seeds, true, func(s storeIndexer) error { return s.Update(obj) }); ok {
		return err
	}
	return p.storeIndexer.Update(obj)
}

func (p gatedStore) Delete(obj interface{}) error {
	if err, ok := fromSeeds(p.gate.seeds, true, func(s storeIndexer) error { return s.Delete(obj) }); ok {
		return err
	}
	return p.storeIndexer.Delete(obj)
}

func (p gatedStore) Replace(list []interface{}, rv string) error {
	if err, ok := fromSeeds(p.gate.seeds, true, func(s storeIndexer) error { return s.Replace(list, rv) }); ok {
		return err
	}
	return p.storeIndexer.Replace(list, rv)
}

func (p gatedStore) Transaction(txns ...cache.Transaction) *cache.TransactionError {
	if err, ok := fromSeeds(p.gate.seeds, true, func(s storeIndexer) *cache.TransactionError { return s.Transaction(txns...) }); ok {
		return err
	}
	return p.storeIndexer.Transaction(txns...)
}

func (p gatedStore) Resync() error {
	if err, ok := fromSeeds(p.gate.seeds, false, storeIndexer.Resync); ok {
		return err
	}
	return p.storeIndexer.Resync()
}

func (p gatedStore) Bookmark(rv string) {
	if _, ok := fromSeeds(p.gate.seeds, false, func(s storeIndexer) struct{} { s.Bookmark(rv); return struct{}{} }); ok {
		return
	}
	p.storeIndexer.Bookmark(rv)
}

// AddIndexers adds the indexers to the informer's store and, while it
// serves, to the seed store.
func (p gatedStore) AddIndexers(indexers cache.Indexers) error {
	if err := p.storeIndexer.AddIndexers(indexers); err != nil {
		return err
	}
	if err, ok := fromSeeds(p.gate.seeds, false, func(s storeIndexer) error { return s.AddIndexers(indexers) }); ok {
		return err
	}
	return nil
}

// A warm start may set stored state aside (see Informer.keepOnly). Its
// store then lacks objects until its relist is applied. The informer may
// already have reported synced. A start that finds the collection marked
// (persist.Collection.MustList) is in the same state until its first list.
// Meanwhile the store owes its readers a list. What listers read through
// GetStore and GetIndexer (gatedStore) then follows one rule. A read that
// could show an object as absent waits until the list is applied. A Get
// that finds its object returns at once. If the informer stops first,
// nothing will complete the store. Such reads then fail with ErrIncomplete
// instead of returning the partial set, as a read error does. List panics
// with it. The informer's own reads, applying deltas and late joins, use
// the store directly and never wait. They run under blockDeltas, which the
// list needs to be applied. A handler that joins meanwhile is given what
// the store holds. The rest reaches it with the list. Its sync and
// tombstones wait for the list (Informer.settleJoinsLocked).

// owedList is one list the store owes.
type owedList struct {
	done chan struct{} // Closed once the list is applied or the informer stopped.
	err  error         // Set before done closes, if the informer stopped first.
}

// owe records that the store lacks part of its state until a list is
// applied. It is called before the state is dropped, so that a read that
// ran across the drop sees the generation change and waits. Every drop is a
// new generation, even while a list is owed already. A recovery that took
// its diff before the drop cannot pay for it (applyRecoveryStepLocked).
// Set-asides owe and drop under the Indexer's writeMu (Indexer.setAside).
// A list's end checks the generation and pays under it too.
func (g *readGate) owe() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	g.owedGen.Add(1)
	if g.owed.Load() != nil {
		return
	}
	o := &owedList{done: make(chan struct{})}
	if g.stopped {
		// A set-aside raced the informer's stop, so no list will come.
		o.err = ErrIncomplete
		close(o.done)
	}
	g.owed.Store(o)
}

// owes reports whether a list is owed.
func (g *readGate) owes() bool { return g.owed.Load() != nil }

// paid records that a list was applied, so waiting reads go on.
func (g *readGate) paid() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	o := g.owed.Load()
	if o == nil {
		return
	}
	g.owed.Store(nil) // Before done closes, so woken readers find nothing owed.
	if o.err == nil {
		close(o.done)
	}
}

// stopOwing is called when the informer stops. A list still owed will not
// come, and reads waiting for it fail with ErrIncomplete.
func (g *readGate) stopOwing() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	g.stopped = true
	if o := g.owed.Load(); o != nil && o.err == nil {
		o.err = ErrIncomplete
		close(o.done)
	}
}

// awaitComplete waits until no list is owed and returns the generation
// that read. It returns ErrIncomplete if the informer stopped first.
func (g *readGate) awaitComplete() (uint64, error) {
	for {
		gen := g.owedGen.Load()
		o := g.owed.Load()
		if o == nil {
			return gen, nil
		}
		g.waiters.Add(1)
		<-o.done
		g.waiters.Add(-1)
		if o.err != nil {
			return 0, o.err
		}
	}
}

// whole runs read once no list is owed. It runs read again if a list
// became owed while it ran, since its result may then lack what was set
// aside.
func whole[T any](g *readGate, read func() T) (T, error) {
	for {
		gen, err := g.awaitComplete()
		if err != nil {
			var zero T
			return zero, err
		}
		v := read()
		if g.owedGen.Load() == gen {
			return v, nil
		}
	}
}

// mustWhole is whole for methods whose client-go signature has no error.
func mustWhole[T any](g *readGate, method string, read func() T) T {
	v, err := whole(g, read)
	if err != nil {
		handleReadError(method, err)
		panic(fmt.Errorf("boltinformer: %s: %w; refusing to return a partial result, which callers would read as deleted objects", method, err))
	}
	return v
}
