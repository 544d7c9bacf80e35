// Reaches into k8s.io/client-go tools/cache/shared_informer.go at v0.37.2:
// the SharedIndexInformer embedded in the unexported
// typedSharedIndexInformer[T], read to look through client-go's typed
// wrappers. If client-go renames it, PersistentIndexer finds no persistent
// indexer in a wrapped informer and the tests that use it fail.

// Package informertest holds what the tests of several packages need to
// look at informers the factories build.
package informertest

import (
	"reflect"

	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// PersistentIndexer returns the persistent indexer of informer, or nil if
// it is not a persistent boltinformer informer. It looks through client-go's
// typed wrappers, at any depth (the generated accessors' Informer() returns
// one, and InformerFor returns the persistent informer in the wrappers
// newFunc's informer was in), each of which embeds the informer it wraps.
func PersistentIndexer(informer cache.SharedIndexInformer) *bcache.Indexer {
	for informer != nil {
		if bi, ok := informer.(*bcache.Informer); ok {
			return bi.Indexer()
		}
		v := reflect.ValueOf(informer)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		f := v.Elem().FieldByName("SharedIndexInformer")
		if !f.IsValid() {
			return nil
		}
		informer, _ = f.Interface().(cache.SharedIndexInformer)
	}
	return nil
}
