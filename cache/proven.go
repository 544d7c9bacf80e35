package cache

import (
	"fmt"
	"sync/atomic"
)

// readGate says what an informer's store may serve: nothing until the
// collection's provenance is checked, and no index lookups while a warm
// start is still verifying the stored index entries.
type readGate struct {
	proven atomic.Bool
	// verifying, while set, is closed once a warm start has checked every
	// stored index entry against the index functions (or stopped trying,
	// because the informer stopped). Index lookups wait for it: an entry
	// written by an older index function must never be served.
	verifying atomic.Pointer[chan struct{}]
}

// waitIndexes blocks until stored index entries may be served.
func (g *readGate) waitIndexes() {
	if ch := g.verifying.Load(); ch != nil {
		<-*ch
	}
}

// provenStore is the store an informer hands out (GetStore, GetIndexer, and
// so every lister). Until the informer has checked the collection's
// provenance it reads as empty, as client-go's store does before its first
// list: what the file holds may come from another cluster or another list,
// and is only served once it is shown to be this informer's (or, if it is
// not, once it has been emptied). Once it is, objects are served at once;
// index lookups wait until the warm start has verified the stored index
// entries (see warmDelivery). Writes go to the underlying store.
type provenStore struct {
	storeIndexer
	gate *readGate
}

func (p provenStore) GetByKey(key string) (interface{}, bool, error) {
	if !p.gate.proven.Load() {
		return nil, false, nil
	}
	return p.storeIndexer.GetByKey(key)
}

func (p provenStore) Get(obj interface{}) (interface{}, bool, error) {
	if !p.gate.proven.Load() {
		return nil, false, nil
	}
	return p.storeIndexer.Get(obj)
}

func (p provenStore) List() []interface{} {
	if !p.gate.proven.Load() {
		return []interface{}{}
	}
	return p.storeIndexer.List()
}

func (p provenStore) ListKeys() []string {
	if !p.gate.proven.Load() {
		return []string{}
	}
	return p.storeIndexer.ListKeys()
}

func (p provenStore) LastStoreSyncResourceVersion() string {
	if !p.gate.proven.Load() {
		return ""
	}
	return p.storeIndexer.LastStoreSyncResourceVersion()
}

// unprovenIndex returns the error client-go's indexer gives for an unknown
// index, which an empty store gives too.
func (p provenStore) unprovenIndex(name string) error {
	if _, ok := p.storeIndexer.GetIndexers()[name]; !ok {
		return fmt.Errorf("Index with name %s does not exist", name)
	}
	return nil
}

func (p provenStore) Index(indexName string, obj interface{}) ([]interface{}, error) {
	if !p.gate.proven.Load() {
		return []interface{}{}, p.unprovenIndex(indexName)
	}
	p.gate.waitIndexes()
	return p.storeIndexer.Index(indexName, obj)
}

func (p provenStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if !p.gate.proven.Load() {
		return []string{}, p.unprovenIndex(indexName)
	}
	p.gate.waitIndexes()
	return p.storeIndexer.IndexKeys(indexName, indexedValue)
}

func (p provenStore) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	if !p.gate.proven.Load() {
		return []interface{}{}, p.unprovenIndex(indexName)
	}
	p.gate.waitIndexes()
	return p.storeIndexer.ByIndex(indexName, indexedValue)
}

func (p provenStore) ListIndexFuncValues(indexName string) []string {
	if !p.gate.proven.Load() {
		return []string{}
	}
	p.gate.waitIndexes()
	return p.storeIndexer.ListIndexFuncValues(indexName)
}
