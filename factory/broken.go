package factory

import (
	"context"
	"fmt"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// brokenInformer stands in for an informer the factory could not build,
// such as one for a type no typed client lists, or after a cache file error.
// InformerFor and ForResource cannot return errors in client-go's
// interfaces, so the error travels with this value. It never syncs. Its Run
// reports the error, and the factory's WaitForCacheSyncWithContext returns
// it.
type brokenInformer struct {
	err     error
	indexer cache.Indexer
}

var _ cache.SharedIndexInformer = (*brokenInformer)(nil)

func newBrokenInformer(err error) *brokenInformer {
	return &brokenInformer{err: err, indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
}

func (b *brokenInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, b.err
}
func (b *brokenInformer) AddEventHandlerWithResyncPeriod(cache.ResourceEventHandler, time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return nil, b.err
}
func (b *brokenInformer) AddEventHandlerWithOptions(cache.ResourceEventHandler, cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return nil, b.err
}
func (b *brokenInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	return b.err
}
func (b *brokenInformer) GetStore() cache.Store           { return b.indexer }
func (b *brokenInformer) GetIndexer() cache.Indexer       { return b.indexer }
func (b *brokenInformer) GetController() cache.Controller { return nil }
func (b *brokenInformer) Run(stopCh <-chan struct{})      { b.RunWithContext(context.Background()) }
func (b *brokenInformer) RunWithContext(ctx context.Context) {
	utilruntime.HandleErrorWithContext(ctx, b.err, "Informer cannot run")
}
func (b *brokenInformer) HasSynced() bool                                    { return false }
func (b *brokenInformer) HasSyncedChecker() cache.DoneChecker                { return neverDone{b.err} }
func (b *brokenInformer) LastSyncResourceVersion() string                    { return "" }
func (b *brokenInformer) SetWatchErrorHandler(cache.WatchErrorHandler) error { return b.err }
func (b *brokenInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return b.err
}
func (b *brokenInformer) SetTransform(cache.TransformFunc) error { return b.err }
func (b *brokenInformer) IsStopped() bool                        { return true }
func (b *brokenInformer) AddIndexers(cache.Indexers) error       { return b.err }

type neverDone struct{ err error }

func (n neverDone) Name() string          { return fmt.Sprintf("broken informer (%v)", n.err) }
func (n neverDone) Done() <-chan struct{} { return nil }
