package cache

import (
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// fallbackStore is a persistent informer's store: its persistent Indexer,
// until an object turns out not to be storable (the codec cannot encode
// what the transform returned). The informer then copies the state into
// client-go's in-memory indexer and switches this store to it, so listers
// and indexers already handed out keep working, as with client-go.
type fallbackStore struct {
	cur atomic.Pointer[storeRef]
}

type storeRef struct{ storeIndexer }

var _ storeIndexer = (*fallbackStore)(nil)

func newFallbackStore(s storeIndexer) *fallbackStore {
	f := &fallbackStore{}
	f.cur.Store(&storeRef{s})
	return f
}

func (f *fallbackStore) get() storeIndexer            { return f.cur.Load().storeIndexer }
func (f *fallbackStore) set(s storeIndexer)           { f.cur.Store(&storeRef{s}) }
func (f *fallbackStore) Add(obj interface{}) error    { return f.get().Add(obj) }
func (f *fallbackStore) Update(obj interface{}) error { return f.get().Update(obj) }
func (f *fallbackStore) Delete(obj interface{}) error { return f.get().Delete(obj) }
func (f *fallbackStore) List() []interface{}          { return f.get().List() }
func (f *fallbackStore) ListKeys() []string           { return f.get().ListKeys() }
func (f *fallbackStore) Get(obj interface{}) (interface{}, bool, error) {
	return f.get().Get(obj)
}
func (f *fallbackStore) GetByKey(key string) (interface{}, bool, error) {
	return f.get().GetByKey(key)
}
func (f *fallbackStore) Replace(list []interface{}, rv string) error {
	return f.get().Replace(list, rv)
}
func (f *fallbackStore) Resync() error      { return f.get().Resync() }
func (f *fallbackStore) Bookmark(rv string) { f.get().Bookmark(rv) }
func (f *fallbackStore) LastStoreSyncResourceVersion() string {
	return f.get().LastStoreSyncResourceVersion()
}
func (f *fallbackStore) Index(name string, obj interface{}) ([]interface{}, error) {
	return f.get().Index(name, obj)
}
func (f *fallbackStore) IndexKeys(name, value string) ([]string, error) {
	return f.get().IndexKeys(name, value)
}
func (f *fallbackStore) ListIndexFuncValues(name string) []string {
	return f.get().ListIndexFuncValues(name)
}
func (f *fallbackStore) ByIndex(name, value string) ([]interface{}, error) {
	return f.get().ByIndex(name, value)
}
func (f *fallbackStore) GetIndexers() cache.Indexers { return f.get().GetIndexers() }
func (f *fallbackStore) AddIndexers(indexers cache.Indexers) error {
	return f.get().AddIndexers(indexers)
}
func (f *fallbackStore) Transaction(txns ...cache.Transaction) *cache.TransactionError {
	return f.get().Transaction(txns...)
}
