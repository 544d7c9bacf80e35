package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/listidentity"
)

// informers builds the cache's informers (cache.Options.NewInformer). It
// keeps track of the live ones by collection.
type informers struct {
	file     *cacheFile
	scheme   *runtime.Scheme
	opts     Options
	byObject map[objectKey]Object
	cluster  bcache.ClusterIdentity
	// recoveries sets up each persistent informer's recovery after a 410.
	recoveries *recoveries

	// mu guards live, the informers built and not yet released, by
	// collection name.
	mu   sync.Mutex
	live map[string]*informer
}

var secretKind = corev1.SchemeGroupVersion.WithKind("Secret")

// newInformer is cache.Options.NewInformer, which controller-runtime calls
// with the cache's lock held. It calls it once per form and
// GroupVersionKind, and per namespace of a multi-namespace cache. It cannot
// take an error, so an informer that cannot be made persistent is returned
// memory-only, and the reason is reported.
func (f *informers) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	inf, err := f.build(lw, obj, resync, indexers)
	if err != nil {
		warnMemoryOnly(err, fmt.Sprintf("the informer of %T", obj))
		inf, err = f.memoryOnly(lw, obj, resync, indexers)
		if err != nil { // a memory-only informer opens nothing, so it cannot fail
			panic(err)
		}
	}
	return inf
}

func (f *informers) memoryOnly(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) (*informer, error) {
	inner, err := bcache.NewSharedIndexInformerWithOptions(lw, obj, bcache.InformerOptions{
		Persistence:  bcache.Persistence{MemoryOnly: true},
		ResyncPeriod: resync,
		Indexers:     indexers,
	})
	if err != nil {
		return nil, err
	}
	return &informer{Informer: inner, released: make(chan struct{})}, nil
}

func (f *informers) build(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) (*informer, error) {
	gvk, err := gvkOf(obj, f.scheme)
	if err != nil {
		return nil, err
	}
	key := objectKey{form: formOf(obj), gvk: gvk}
	u, err := probeList(lw)
	if err != nil {
		return nil, err
	}
	o := f.byObject[key]
	transformVersion := o.TransformVersion
	if transformVersion == "" {
		transformVersion = f.opts.TransformVersion
	}
	id := listidentity.FromRequest(string(key.form), key.gvk, u, transformVersion)
	p := bcache.Persistence{
		Collection:       id.Collection(),
		Description:      id.Description(),
		ListIdentity:     id.String(),
		Cluster:          f.cluster,
		TransformVersion: transformVersion,
		CacheObjects:     f.opts.CacheObjects,
		CacheBytes:       f.opts.CacheBytes,
		MemoryOnly:       o.MemoryOnly || (gvk == secretKind && !f.opts.PersistSecrets),
		// Secrets of every form are decided above, since the core does not
		// recognise an unstructured or metadata Secret.
		PersistSecrets: true,
	}
	if p.MemoryOnly {
		return f.memoryOnly(lw, obj, resync, indexers)
	}
	// The Cache method that led here has opened the file. get opens it for
	// an informer built another way.
	if p.DB, err = f.file.get(); err != nil {
		return nil, err
	}
	if err := f.waitReleased(p.Collection); err != nil {
		return nil, err
	}

	// Declared field indexes open with a slot as their function. A slot's
	// stored index may need a rebuild while its extractor is not known yet.
	// That slot is unbound, and the open retried without it.
	p.IndexVersions = map[string]string{}
	bound := map[string]*fieldSlot{}
	unbound := map[string]*fieldSlot{}
	for field, v := range o.FieldIndexVersions {
		name := fieldIndexPrefix + field
		p.IndexVersions[name] = v
		bound[name] = &fieldSlot{opening: true}
	}
	recovery, err := f.recoveries.recovery(lw, key, u)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("boltcr: %s will list in full after a 410 instead of recovering by what changed: %w", p.Collection, err))
	}
	var inner *bcache.Informer
	for {
		all := toolscache.Indexers{}
		for name, fn := range indexers {
			all[name] = fn
		}
		for name, slot := range bound {
			all[name] = slot.index
		}
		inner, err = bcache.NewSharedIndexInformerWithOptions(lw, obj, bcache.InformerOptions{
			Persistence:       p,
			ResyncPeriod:      resync,
			Indexers:          all,
			ObjectDescription: p.Collection,
			SyncedAtOpen:      f.opts.SyncedAtOpen,
			Metrics:           f.opts.Metrics,
			Recovery:          recovery,
		})
		if err == nil {
			break
		}
		// The failed open rolled back, so retry without the slots it asked
		// for.
		asked := false
		for name, slot := range bound {
			slot.mu.RLock()
			wasAsked := slot.asked
			slot.mu.RUnlock()
			if wasAsked {
				asked = true
				delete(bound, name)
				unbound[name] = &fieldSlot{}
			}
		}
		if !asked {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for _, slot := range bound {
		slot.mu.Lock()
		slot.opening = false
		slot.mu.Unlock()
	}
	inf := &informer{Informer: inner, key: key, collection: p.Collection, metrics: f.opts.Metrics, bound: bound, unbound: unbound, released: make(chan struct{})}
	f.mu.Lock()
	f.live[p.Collection] = inf
	f.mu.Unlock()
	return inf, nil
}

// waitReleased waits for a live informer of the same collection to
// release it. Such an informer was removed from controller-runtime's cache
// without the adapter's RemoveInformer.
func (f *informers) waitReleased(collection string) error {
	f.mu.Lock()
	prev := f.live[collection]
	delete(f.live, collection)
	f.mu.Unlock()
	if prev == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return prev.release(ctx)
}

// release releases every live informer of key, which controller-runtime
// has just removed.
func (f *informers) release(ctx context.Context, key objectKey) error {
	f.mu.Lock()
	var names []string
	for name := range f.live {
		if f.live[name].key == key {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	released := make([]*informer, 0, len(names))
	for _, name := range names {
		released = append(released, f.live[name])
		delete(f.live, name)
	}
	f.mu.Unlock()
	var errs []error
	for _, inf := range released {
		if err := inf.release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
