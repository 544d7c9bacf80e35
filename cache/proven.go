package cache

import (
	"fmt"
	"sync/atomic"
)

// provenStore is the store an informer hands out (GetStore, GetIndexer, and
// so every lister). Until the informer has checked the collection's
// provenance it reads as empty, as client-go's store does before its first
// list: what the file holds may come from another cluster or another list,
// and is only served once it is shown to be this informer's (or, if it is
// not, once it has been emptied). Writes go to the underlying store.
type provenStore struct {
	storeIndexer
	proven *atomic.Bool
}

func (p provenStore) GetByKey(key string) (interface{}, bool, error) {
	if !p.proven.Load() {
		return nil, false, nil
	}
	return p.storeIndexer.GetByKey(key)
}

func (p provenStore) Get(obj interface{}) (interface{}, bool, error) {
	if !p.proven.Load() {
		return nil, false, nil
	}
	return p.storeIndexer.Get(obj)
}

func (p provenStore) List() []interface{} {
	if !p.proven.Load() {
		return []interface{}{}
	}
	return p.storeIndexer.List()
}

func (p provenStore) ListKeys() []string {
	if !p.proven.Load() {
		return []string{}
	}
	return p.storeIndexer.ListKeys()
}

func (p provenStore) LastStoreSyncResourceVersion() string {
	if !p.proven.Load() {
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
	if !p.proven.Load() {
		return []interface{}{}, p.unprovenIndex(indexName)
	}
	return p.storeIndexer.Index(indexName, obj)
}

func (p provenStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if !p.proven.Load() {
		return []string{}, p.unprovenIndex(indexName)
	}
	return p.storeIndexer.IndexKeys(indexName, indexedValue)
}

func (p provenStore) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	if !p.proven.Load() {
		return []interface{}{}, p.unprovenIndex(indexName)
	}
	return p.storeIndexer.ByIndex(indexName, indexedValue)
}

func (p provenStore) ListIndexFuncValues(indexName string) []string {
	if !p.proven.Load() {
		return []string{}
	}
	return p.storeIndexer.ListIndexFuncValues(indexName)
}
