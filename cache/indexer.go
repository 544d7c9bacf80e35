package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgofeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/internal/wire"
	"github.com/boltinformer/boltinformer/persist"
)

// IndexerOptions configures NewIndexer.
type IndexerOptions struct {
	// DB is the open cache file. Required. The Indexer does not close it.
	DB *persist.DB

	// Collection names the bucket tree this Indexer owns in DB. Required.
	Collection string

	// Description is shown by tools such as inspect (resource, namespace,
	// selectors).
	Description map[string]string

	// KeyFunc makes store keys. Nil means cache.DeletionHandlingMetaNamespaceKeyFunc.
	KeyFunc cache.KeyFunc

	// Indexers are the secondary indexes, as with cache.NewIndexer.
	Indexers cache.Indexers

	// IndexVersions declares a version per index name. An index on disk is
	// reused only if its name, its version and its function's name are those
	// given now. Otherwise it is rebuilt from the stored objects when the
	// Indexer opens. Bump an index's version whenever its function's
	// behaviour changes without its Go name changing. A closure over a
	// different parameter is such a change. Unset versions are "". A
	// version declared for a name that is not among Indexers applies when
	// AddIndexers adds that name later.
	IndexVersions map[string]string

	// Transform is applied to every object before it is stored, as with
	// cache.WithTransformer.
	Transform cache.TransformFunc
	// TransformVersion declares the version of Transform. Objects are stored
	// transformed. So a collection stored under another TransformVersion is
	// emptied when the Indexer opens. So is one stored under another
	// transform function name, or with a transform where none is given now,
	// or the reverse. Change it whenever the transform's behaviour changes
	// without its Go name changing.
	TransformVersion string

	// ListIdentity says what the stored objects are a list of (resource,
	// namespace, selectors). A collection stored under another ListIdentity
	// is emptied, resourceVersion included, when the Indexer opens. Empty is
	// recorded as empty and matches only empty. Collection.ResetAtOpen says
	// whether that happened.
	ListIdentity string

	// CacheObjects and CacheBytes bound the in-memory cache of decoded
	// objects. Zero for both keeps all of them (see persist.CollectionOptions).
	CacheObjects int
	CacheBytes   int64
}

// Indexer is a cache.Indexer whose objects, indexes and resource version live
// in a persist.Collection. A change is visible to reads as soon as the call
// that made it returns. It is on disk after the next group commit.
//
// Unlike client-go's indexer, an index function that fails does not panic.
// The write returns the error, and nothing of it is applied.
type Indexer struct {
	coll      *persist.Collection
	keyFunc   cache.KeyFunc
	transform cache.TransformFunc
	// wirePayloads is set by an informer whose objects reach the store
	// unchanged since they were decoded, with no transform. An object's
	// payload remembered by internal/wire is then what it was decoded from.
	// That payload is stored instead of marshalling the object again.
	wirePayloads atomic.Bool

	// writeMu serializes writes. Each write thus computes its index values
	// against the indexer set it is applied with. Replace's diff stays valid
	// until it is applied. An informer's set-asides hold it too (setAside).
	// A list's end thus precedes a whole set-aside, or follows it.
	writeMu sync.Mutex

	// indexMu guards indexers and versions.
	indexMu  sync.RWMutex
	indexers cache.Indexers
	versions map[string]string

	// memory, once set by moveToMemory, serves every call instead of the
	// collection.
	memory atomic.Pointer[memoryStore]

	// declared is IndexerOptions.IndexVersions, read-only after NewIndexer.
	declared map[string]string

	// readErrors counts failed file reads. onReadError hears about them
	// (see readerror.go).
	readErrors  atomic.Uint64
	onReadError atomic.Pointer[readErrorHandler]
	// retryWait, if set, is closed when a failed read may be retried (see
	// retryAfter).
	retryWait atomic.Pointer[func() <-chan struct{}]
	// listApplied, if set, is called after each Replace that succeeded.
	listApplied atomic.Pointer[func()]
	// setAsideUnreadable, if set, is the informer's. It sets aside stored
	// records an index build cannot decode, and lists them again (see
	// setaside.go). A bare Indexer has none.
	setAsideUnreadable atomic.Pointer[func(keys []string, why error) error]
}

// onUnreadable makes AddIndexers hand the records it cannot decode to fn,
// then build again.
func (i *Indexer) onUnreadable(fn func(keys []string, why error) error) {
	i.setAsideUnreadable.Store(&fn)
}

// onList makes Replace call fn after each list it applied.
func (i *Indexer) onList(fn func()) { i.listApplied.Store(&fn) }

// notifyList tells onList's function a list was applied.
func (i *Indexer) notifyList() {
	if fn := i.listApplied.Load(); fn != nil {
		(*fn)()
	}
}

type memoryStore struct{ storeIndexer }

// inMemory returns the in-memory store that replaced the collection, or
// nil.
func (i *Indexer) inMemory() storeIndexer {
	if m := i.memory.Load(); m != nil {
		return m.storeIndexer
	}
	return nil
}

// InMemory reports whether the Indexer keeps its objects in memory, in
// client-go's indexer, instead of the file. An informer moves it there when
// an object cannot be encoded.
func (i *Indexer) InMemory() bool { return i.memory.Load() != nil }

// moveToMemory copies the current state into client-go's in-memory indexer,
// which from then on serves every call. It drops the collection's
// resourceVersion, so that the file is never resumed from. The file lacks
// what could not be stored. The Indexer must have no Transform, since an
// informer's transform runs in its queue.
func (i *Indexer) moveToMemory() error {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	objs, err := i.coll.List()
	if err != nil {
		return fmt.Errorf("reading the collection to move it to memory: %w", err)
	}
	mem := cache.NewIndexer(i.keyFunc, i.GetIndexers()).(storeIndexer)
	for _, obj := range objs {
		if err := mem.Add(obj); err != nil {
			return fmt.Errorf("moving the collection to memory: %w", err)
		}
	}
	mem.Bookmark(i.coll.ResourceVersion())
	i.memory.Store(&memoryStore{mem})
	// Apply with no ops cannot fail to encode. On a closed file there is
	// nothing left to resume from anyway.
	_ = i.coll.Apply(nil, "")
	return nil
}

var (
	_ cache.Indexer          = (*Indexer)(nil)
	_ cache.TransactionStore = (*Indexer)(nil)
)

// NewIndexer opens (or creates) the collection and returns an Indexer over
// it. Its contents and resource version are whatever the file holds.
func NewIndexer(opts IndexerOptions) (*Indexer, error) {
	return newIndexer(opts, map[string]string{
		provenanceList:      opts.ListIdentity,
		provenanceTransform: versioned(opts.TransformVersion, opts.Transform),
	})
}

// newIndexer opens the collection checking provenance, or checking nothing
// if provenance is nil (an informer checks when it starts).
func newIndexer(opts IndexerOptions, provenance map[string]string) (*Indexer, error) {
	if opts.DB == nil {
		return nil, errors.New("boltinformer: IndexerOptions.DB is required")
	}
	if opts.Collection == "" {
		return nil, errors.New("boltinformer: IndexerOptions.Collection is required")
	}
	i := &Indexer{
		keyFunc:   opts.KeyFunc,
		transform: opts.Transform,
		indexers:  cache.Indexers{},
		versions:  map[string]string{},
		declared:  opts.IndexVersions,
	}
	if i.keyFunc == nil {
		i.keyFunc = cache.DeletionHandlingMetaNamespaceKeyFunc
	}
	for name, fn := range opts.Indexers {
		i.indexers[name] = fn
		i.versions[name] = versioned(opts.IndexVersions[name], fn)
	}
	coll, err := opts.DB.Collection(opts.Collection, persist.CollectionOptions{
		Description:  opts.Description,
		Indexes:      i.versions,
		IndexValues:  i.indexValues,
		CacheObjects: opts.CacheObjects,
		CacheBytes:   opts.CacheBytes,
		Provenance:   provenance,
	})
	if err != nil {
		return nil, err
	}
	if m := coll.ResetAtOpen(); m != nil {
		klog.Background().Info("Stored collection was recorded under another provenance; it was emptied and starts cold", "collection", opts.Collection, "reason", m.Error())
	}
	if err := coll.JournalSetAside(); err != nil {
		klog.Background().Info("The stored collection's journal could not be read; it was set aside (kept: the objects as last folded), and the collection lists before it is synced", "collection", opts.Collection, "err", err)
	}
	i.coll = coll
	return i, nil
}

// repairIndexes compares the stored index entries of objs (at keys) with
// what the index functions give now and rewrites those that differ, at the
// collection's resourceVersion. It returns the repaired keys. Index
// functions are code. One may have changed behaviour without changing its
// Go name or declared version.
//
// The functions run without writeMu, since they are user code and may be
// slow. Only the objects found to differ are recomputed and written under
// it. So AddIndexers and writes are never held up by a verification.
func (i *Indexer) repairIndexes(keys []string, objs []runtime.Object) ([]string, error) {
	indexers := i.GetIndexers()
	stored, err := i.coll.StoredIndexValues(keys)
	if err != nil {
		return nil, err
	}
	var suspects []int
	for n, key := range keys {
		values := make(map[string][]string, len(indexers))
		for name, fn := range indexers {
			v, err := fn(objs[n])
			if err != nil {
				return nil, fmt.Errorf("unable to calculate an index entry for key %q on index %q: %w", key, name, err)
			}
			values[name] = v
		}
		if !sameIndexValues(stored[key], values) {
			suspects = append(suspects, n)
		}
	}
	if len(suspects) == 0 {
		return nil, nil
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	suspectKeys := make([]string, len(suspects))
	for j, n := range suspects {
		suspectKeys[j] = keys[n]
	}
	// Read again under writeMu, in case AddIndexers ran meanwhile. Objects
	// do not change during a warm start's delivery, since watch events wait
	// for it.
	stored, err = i.coll.StoredIndexValues(suspectKeys)
	if err != nil {
		return nil, err
	}
	var ops []persist.Op
	var repaired []string
	for _, n := range suspects {
		key := keys[n]
		op, err := i.op(key, objs[n])
		if err != nil {
			return nil, err
		}
		if sameIndexValues(stored[key], op.Indexes) {
			continue
		}
		ops = append(ops, op)
		repaired = append(repaired, key)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return repaired, i.coll.Apply(ops, i.coll.ResourceVersion())
}

// sameIndexValues compares two index-name -> values maps as sets of
// values, treating a missing index like one without values.
func sameIndexValues(a, b map[string][]string) bool {
	norm := func(v []string) []string { return sets.List(sets.New(v...)) }
	for name, va := range a {
		if !slices.Equal(norm(va), norm(b[name])) {
			return false
		}
	}
	for name, vb := range b {
		if _, ok := a[name]; !ok && len(vb) > 0 {
			return false
		}
	}
	return true
}

func (i *Indexer) indexValues(name string, obj runtime.Object) ([]string, error) {
	fn := i.indexers[name]
	if fn == nil {
		return nil, fmt.Errorf("Index with name %s does not exist", name)
	}
	return fn(obj)
}

// Collection returns the underlying collection.
func (i *Indexer) Collection() *persist.Collection { return i.coll }

// op builds the persist op for storing obj, computing every index value.
// Called with writeMu held.
func (i *Indexer) op(key string, obj interface{}) (persist.Op, error) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return persist.Op{}, fmt.Errorf("%w: %T is not a runtime.Object", persist.ErrUnencodable, obj)
	}
	i.indexMu.RLock()
	defer i.indexMu.RUnlock()
	values := make(map[string][]string, len(i.indexers))
	for name, fn := range i.indexers {
		v, err := fn(obj)
		if err != nil {
			return persist.Op{}, fmt.Errorf("unable to calculate an index entry for key %q on index %q: %w", key, name, err)
		}
		if len(v) > 0 {
			values[name] = v
		}
	}
	op := persist.Op{Key: key, Object: ro, Indexes: values}
	if i.transform == nil && i.wirePayloads.Load() {
		op.Payload, _ = wire.Take(ro)
	}
	return op, nil
}

func (i *Indexer) keyAndTransform(obj interface{}) (string, interface{}, error) {
	key, err := i.keyFunc(obj)
	if err != nil {
		return "", nil, cache.KeyError{Obj: obj, Err: err}
	}
	if i.transform != nil {
		if obj, err = i.transform(obj); err != nil {
			return key, nil, fmt.Errorf("transforming %q: %w", key, err)
		}
	}
	return key, obj, nil
}

// rvAfter returns the store resource version after writing obj. That is
// obj's own if it has object metadata, even if empty, as client-go does.
// Otherwise the version is unchanged.
func (i *Indexer) rvAfter(obj interface{}) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return i.coll.ResourceVersion()
}

// Add inserts obj.
func (i *Indexer) Add(obj interface{}) error { return i.Update(obj) }

// Update stores obj under its key.
func (i *Indexer) Update(obj interface{}) error {
	if m := i.inMemory(); m != nil {
		return m.Update(obj)
	}
	key, obj, err := i.keyAndTransform(obj)
	if err != nil {
		return err
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	op, err := i.op(key, obj)
	if err != nil {
		return err
	}
	return i.coll.Apply([]persist.Op{op}, i.rvAfter(obj))
}

// Delete removes obj's key.
func (i *Indexer) Delete(obj interface{}) error {
	if m := i.inMemory(); m != nil {
		return m.Delete(obj)
	}
	key, err := i.keyFunc(obj)
	if err != nil {
		return cache.KeyError{Obj: obj, Err: err}
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	return i.coll.Apply([]persist.Op{{Key: key, Delete: true, DeletedAt: deletedAt(obj)}}, i.rvAfter(obj))
}

// deletedAt returns the resourceVersion of obj as deleted
// (persist.Op.DeletedAt). A checkpoint uses it to tell an acknowledgement
// of the deletion from a late one of an earlier state. It is empty for a
// deletion found by a relist, a cache.DeletedFinalStateUnknown.
func deletedAt(obj interface{}) string {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// Transaction applies txns in one Apply. Transactions whose key cannot be
// computed, or whose index values cannot, are skipped and reported.
func (i *Indexer) Transaction(txns ...cache.Transaction) *cache.TransactionError {
	if m := i.inMemory(); m != nil {
		return m.Transaction(txns...)
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	ops := make([]persist.Op, 0, len(txns))
	ok := make([]int, 0, len(txns))
	var errs []error
	for n, txn := range txns {
		var op persist.Op
		var err error
		if txn.Type == cache.TransactionTypeDelete {
			var key string
			if key, err = i.keyFunc(txn.Object); err != nil {
				err = cache.KeyError{Obj: txn.Object, Err: err}
			}
			op = persist.Op{Key: key, Delete: true, DeletedAt: deletedAt(txn.Object)}
		} else {
			var key string
			var obj interface{}
			if key, obj, err = i.keyAndTransform(txn.Object); err == nil {
				op, err = i.op(key, obj)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ops = append(ops, op)
		ok = append(ok, n)
	}
	rv := i.coll.ResourceVersion()
	if len(txns) > 0 {
		rv = i.rvAfter(txns[len(txns)-1].Object)
	}
	if len(ops) > 0 || len(txns) > 0 {
		if err := i.coll.Apply(ops, rv); err != nil {
			return &cache.TransactionError{TotalTransactions: len(txns), Errors: append(errs, err)}
		}
	}
	if len(errs) > 0 {
		return &cache.TransactionError{SuccessfulIndices: ok, TotalTransactions: len(txns), Errors: errs}
	}
	return nil
}

// Replace makes the store hold exactly list, at resource version rv. Objects
// whose resource version equals the stored one are not rewritten.
//
// An object whose key, transform or index values cannot be computed is
// refused, as Update refuses it. Its key keeps what the store held. The
// rest of the list is applied, and the error names each refusal. Dropping
// the whole list would leave a store the informer reports synced, or
// readers waiting for a list that is never applied.
//
// A Replace is a list. It clears the collection's must-list mark (see
// persist.Collection.MustList) in the commit that writes it.
func (i *Indexer) Replace(list []interface{}, rv string) error {
	if m := i.inMemory(); m != nil {
		if err := m.Replace(list, rv); err != nil {
			return err
		}
		i.notifyList()
		return nil
	}
	type item struct {
		key string
		obj interface{}
	}
	items := make([]item, 0, len(list))
	var refused *refusedError
	refuse := func(key string, err error) {
		if refused == nil {
			refused = &refusedError{rv: rv, keys: map[string]bool{}}
		}
		if key != "" {
			refused.keys[key] = true
		}
		refused.errs = append(refused.errs, err)
	}
	for _, obj := range list {
		key, obj, err := i.keyAndTransform(obj)
		if err != nil {
			refuse(key, err)
			continue
		}
		items = append(items, item{key, obj})
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	stored, err := i.coll.ResourceVersions()
	if err != nil {
		return fmt.Errorf("replace: reading stored versions: %w", err)
	}
	if refused != nil {
		for key := range refused.keys {
			delete(stored, key) // kept, not gone
		}
	}
	ops := make([]persist.Op, 0, len(items))
	for _, it := range items {
		storedRV, had := stored[it.key]
		delete(stored, it.key)
		if had && storedRV != "" {
			if m, err := meta.Accessor(it.obj); err == nil && m.GetResourceVersion() == storedRV {
				continue
			}
		}
		op, err := i.op(it.key, it.obj)
		if errors.Is(err, persist.ErrUnencodable) {
			// The informer keeps such objects in memory from then on
			// (moveToMemoryLocked), with the whole list.
			return err
		}
		if err != nil {
			refuse(it.key, err)
			continue
		}
		ops = append(ops, op)
	}
	gone := make([]string, 0, len(stored))
	for key := range stored {
		gone = append(gone, key)
	}
	sort.Strings(gone)
	for _, key := range gone {
		ops = append(ops, persist.Op{Key: key, Delete: true})
	}
	if err := i.coll.ApplyList(ops, rv); err != nil {
		return err
	}
	i.notifyList()
	if refused != nil {
		return refused
	}
	return nil
}

// refusedError is Replace's error when it applied its list without the
// objects it refused. processReplacedAllInfo tells handlers of the rest.
type refusedError struct {
	rv   string
	keys map[string]bool // The keys refused. An object without a key adds none.
	errs []error
}

func (e *refusedError) Error() string {
	msgs := make([]string, len(e.errs))
	for n, err := range e.errs {
		msgs[n] = err.Error()
	}
	return fmt.Sprintf("the list at resourceVersion %q was applied without %d objects the store refused (%s); "+
		"each keeps its earlier state in the store until a later version is accepted: "+
		"make the index functions, the key function or the transform accept them", e.rv, len(e.errs), strings.Join(msgs, "; "))
}

func (e *refusedError) Unwrap() []error { return e.errs }

// refusedKey reports whether the list left key's object out.
func (e *refusedError) refusedKey(key string) bool { return e.keys[key] }

// Resync does nothing, as for client-go's store.
func (i *Indexer) Resync() error { return nil }

// Bookmark records rv as the store's resource version.
func (i *Indexer) Bookmark(rv string) {
	if m := i.inMemory(); m != nil {
		m.Bookmark(rv)
		return
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	// Apply with no ops cannot fail to encode. It fails only on a closed or
	// read-only file, where there is nothing to record.
	_ = i.coll.Apply(nil, rv)
}

// LastStoreSyncResourceVersion returns the resource version of the latest
// write or bookmark, or the stored one after a restart. Like client-go, it
// returns "" unless the AtomicFIFO feature gate is enabled (the default).
func (i *Indexer) LastStoreSyncResourceVersion() string {
	if m := i.inMemory(); m != nil {
		return m.LastStoreSyncResourceVersion()
	}
	if !clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) {
		return ""
	}
	return i.coll.ResourceVersion()
}

// Get returns the object stored under obj's key.
func (i *Indexer) Get(obj interface{}) (interface{}, bool, error) {
	key, err := i.keyFunc(obj)
	if err != nil {
		return nil, false, cache.KeyError{Obj: obj, Err: err}
	}
	return i.GetByKey(key)
}

// GetByKey returns the object stored under key. A failed read is reported
// and returned as an error, never as absence (see doc.go).
func (i *Indexer) GetByKey(key string) (interface{}, bool, error) {
	if m := i.inMemory(); m != nil {
		return m.GetByKey(key)
	}
	obj, ok, err := i.coll.Get(key)
	if err != nil { // report it and try once more (see readerror.go)
		i.reportReadError("GetByKey", err)
		i.waitRetry()
		if obj, ok, err = i.coll.Get(key); err != nil {
			return nil, false, i.reportReadError("GetByKey", err)
		}
	}
	if !ok {
		return nil, false, nil
	}
	return obj, true, nil
}

// getOnce is GetByKey without the retry, which may wait. It is for a caller
// holding a lock the wait depends on. A read error is reported.
func (i *Indexer) getOnce(key string) (interface{}, bool, error) {
	if m := i.inMemory(); m != nil {
		return m.GetByKey(key)
	}
	obj, ok, err := i.getUnreported(key)
	if err != nil {
		return nil, false, i.reportReadError("GetByKey", err)
	}
	return obj, ok, nil
}

// getUnreported is getOnce without reporting a read error of the file. A
// caller that holds a lock reports it with reportReadError once it
// released the lock, since the report calls the user's watch error handler.
func (i *Indexer) getUnreported(key string) (interface{}, bool, error) {
	if m := i.inMemory(); m != nil {
		return m.GetByKey(key)
	}
	obj, ok, err := i.coll.Get(key)
	if err != nil || !ok {
		return nil, false, err
	}
	return obj, true, nil
}

// getManyOnce is getOnce for many keys. It returns their stored objects,
// decoded on every core, and leaves absent keys out. A read error is not
// reported, since getOnce tells which key it concerns.
func (i *Indexer) getManyOnce(keys []string) ([]interface{}, error) {
	out := make([]interface{}, 0, len(keys))
	if m := i.inMemory(); m != nil {
		for _, key := range keys {
			if obj, ok, _ := m.GetByKey(key); ok {
				out = append(out, obj)
			}
		}
		return out, nil
	}
	objs, err := i.coll.GetMany(keys)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		out = append(out, obj)
	}
	return out, nil
}

// List returns every object. With every object in memory it never reads
// the file. A file read that fails twice panics rather than return a
// partial list (see doc.go).
func (i *Indexer) List() []interface{} {
	if m := i.inMemory(); m != nil {
		return m.List()
	}
	return mustRead(i, "List", func() ([]interface{}, error) { return i.coll.AppendList(nil) })
}

// ListKeys returns every key. A read error is handled as by List.
func (i *Indexer) ListKeys() []string {
	if m := i.inMemory(); m != nil {
		return m.ListKeys()
	}
	return mustRead(i, "ListKeys", i.coll.Keys)
}

// GetIndexers returns a copy of the indexers.
func (i *Indexer) GetIndexers() cache.Indexers {
	if m := i.inMemory(); m != nil {
		return m.GetIndexers()
	}
	i.indexMu.RLock()
	defer i.indexMu.RUnlock()
	out := make(cache.Indexers, len(i.indexers))
	for k, v := range i.indexers {
		out[k] = v
	}
	return out
}

// AddIndexers adds indexes and builds them over the stored objects. If an
// index function fails for any stored object, none of newIndexers is added.
// Nor is any if a stored record cannot be read back. The error wraps
// persist.ErrCorruptRecord and names the records, which are kept, and reads
// of them keep failing. An informer's Indexer sets such records aside
// instead, lists them again, and adds the indexers (see setaside.go).
func (i *Indexer) AddIndexers(newIndexers cache.Indexers) error {
	for {
		err := i.addIndexers(newIndexers)
		var unreadable *persist.UnreadableRecordsError
		if !errors.As(err, &unreadable) {
			return err
		}
		setAside := i.setAsideUnreadable.Load()
		if setAside == nil {
			return i.reportReadError("AddIndexers", fmt.Errorf("%w. Write those keys anew (Update, Delete, or Replace with a list), then add the indexers again", err))
		}
		// Without writeMu, since the informer takes locks above it. Each pass
		// drops the records the last one could not read, and a record
		// written since decodes, so the loop ends.
		if err := (*setAside)(unreadable.Keys, err); err != nil {
			return fmt.Errorf("boltinformer: AddIndexers: collection %q: setting aside stored records that cannot be read back: %w", i.coll.Name(), err)
		}
	}
}

// addIndexers is AddIndexers for one build.
func (i *Indexer) addIndexers(newIndexers cache.Indexers) error {
	if m := i.inMemory(); m != nil {
		return m.AddIndexers(newIndexers)
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	i.indexMu.RLock()
	var conflict []string
	for name := range newIndexers {
		if _, ok := i.indexers[name]; ok {
			conflict = append(conflict, name)
		}
	}
	i.indexMu.RUnlock()
	if len(conflict) > 0 {
		sort.Strings(conflict)
		return fmt.Errorf("indexer conflict: %v", sets.New(conflict...))
	}
	versions := make(map[string]string, len(newIndexers))
	for name, fn := range newIndexers {
		versions[name] = versioned(i.declared[name], fn)
	}
	build := func(name string, obj runtime.Object) ([]string, error) { return newIndexers[name](obj) }
	if err := i.coll.AddIndexes(context.Background(), versions, build); err != nil {
		return err
	}
	i.indexMu.Lock()
	defer i.indexMu.Unlock()
	for name, fn := range newIndexers {
		i.indexers[name] = fn
		i.versions[name] = versions[name]
	}
	return nil
}

// Index returns the objects sharing any of obj's values for the named index.
func (i *Indexer) Index(indexName string, obj interface{}) ([]interface{}, error) {
	if m := i.inMemory(); m != nil {
		return m.Index(indexName, obj)
	}
	i.indexMu.RLock()
	fn := i.indexers[indexName]
	i.indexMu.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("Index with name %s does not exist", indexName)
	}
	values, err := fn(obj)
	if err != nil {
		return nil, err
	}
	objs, err := readOrErr(i, "Index", func() ([]runtime.Object, error) {
		keys := sets.New[string]()
		for _, v := range values {
			k, err := i.coll.IndexKeys(indexName, v)
			if err != nil {
				return nil, err
			}
			keys.Insert(k...)
		}
		return i.coll.GetMany(sets.List(keys))
	})
	if err != nil {
		return nil, err
	}
	return toInterfaces(objs), nil
}

// IndexKeys returns the keys whose values for the named index include value.
func (i *Indexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if m := i.inMemory(); m != nil {
		return m.IndexKeys(indexName, indexedValue)
	}
	if err := i.checkIndex(indexName); err != nil {
		return nil, err
	}
	return readOrErr(i, "IndexKeys", func() ([]string, error) { return i.coll.IndexKeys(indexName, indexedValue) })
}

// ListIndexFuncValues returns the values of the named index. It returns nil
// for an unknown index, as client-go's does. A read error is handled as by
// List.
func (i *Indexer) ListIndexFuncValues(indexName string) []string {
	if m := i.inMemory(); m != nil {
		return m.ListIndexFuncValues(indexName)
	}
	if i.checkIndex(indexName) != nil {
		return nil
	}
	return mustRead(i, "ListIndexFuncValues", func() ([]string, error) { return i.coll.IndexValues(indexName) })
}

// ByIndex returns the objects whose values for the named index include
// value. A failed read returns the error and no objects.
func (i *Indexer) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	if m := i.inMemory(); m != nil {
		return m.ByIndex(indexName, indexedValue)
	}
	if err := i.checkIndex(indexName); err != nil {
		return nil, err
	}
	objs, err := i.coll.AppendByIndex(nil, indexName, indexedValue)
	if err != nil { // report it and try once more (see readerror.go)
		i.reportReadError("ByIndex", err)
		i.waitRetry()
		if objs, err = i.coll.AppendByIndex(nil, indexName, indexedValue); err != nil {
			return nil, i.reportReadError("ByIndex", err)
		}
	}
	return objs, nil
}

// checkIndex returns client-go's error for an index that does not exist,
// which is the caller's mistake, not a read error.
func (i *Indexer) checkIndex(name string) error {
	i.indexMu.RLock()
	defer i.indexMu.RUnlock()
	if _, ok := i.indexers[name]; !ok {
		return fmt.Errorf("Index with name %s does not exist", name)
	}
	return nil
}

func toInterfaces(objs []runtime.Object) []interface{} {
	out := make([]interface{}, len(objs))
	for n, o := range objs {
		out[n] = o
	}
	return out
}

// markMustList sets the collection's must-list mark, as a recovery begins.
func (i *Indexer) markMustList() error {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	return i.coll.SetAside(nil)
}

// endList records that the store holds the whole collection as of rv
// — a list received in pages, or a recovery, has been applied — and clears
// the must-list mark, in one commit; then tells onList's function.
//
// current, if not nil, says whether the store still holds what the list
// was compared with. It is asked under writeMu, which a set-aside holds
// throughout (setAside). If it says no, endList writes and tells nothing,
// and returns false. The check, the commit and the telling are thus one
// step. A set-aside between them would be paid for by a list without its
// keys.
func (i *Indexer) endList(rv string, current func() bool) (bool, error) {
	if m := i.inMemory(); m != nil {
		if current != nil && !current() {
			return false, nil
		}
		m.Bookmark(rv)
		i.notifyList()
		return true, nil
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	if current != nil && !current() {
		return false, nil
	}
	if err := i.coll.ApplyList(nil, rv); err != nil {
		return false, err
	}
	i.notifyList()
	return true, nil
}

// setAside runs drop under writeMu. drop sets stored state aside between two
// new generations of the read gate (keepOnly). No list's end or Replace then
// commits between those generations and the drop.
func (i *Indexer) setAside(drop func() error) error {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	return drop()
}
