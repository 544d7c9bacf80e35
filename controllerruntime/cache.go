package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/boltinformer/boltinformer/persist"
)

// NewCache returns a cache.NewCacheFunc for manager.Options.NewCache or
// cluster.Options.NewCache. It builds the manager's cache, with every
// informer persisted to the cache file opts names.
func NewCache(opts Options) cache.NewCacheFunc {
	return func(config *rest.Config, cacheOpts cache.Options) (cache.Cache, error) {
		c, err := New(config, cacheOpts, opts)
		if err != nil {
			// An untyped nil, since a nil *Cache in the interface is not nil.
			return nil, err
		}
		return c, nil
	}
}

// Cache is controller-runtime's cache (cache.New) over boltinformer
// informers. Beyond the embedded cache, it opens the file when first
// needed and closes it when Start returns (see New). Its RemoveInformer
// returns once the removed informers have released their collections.
type Cache struct {
	cache.Cache
	file     *cacheFile
	scheme   *runtime.Scheme
	informer *informers

	// started is set by the first Start, the only call that runs the
	// embedded cache and closes the file.
	started atomic.Bool
}

var _ cache.Cache = (*Cache)(nil)

// New is cache.New(config, cacheOpts) with persistent informers.
// cacheOpts.NewInformer must be unset, because New sets it. New does not
// open the cache file. Start opens it, or the first informer built before
// Start (IndexField, GetInformer, Get or List). The file is closed when
// Start returns, and a cache never used holds nothing. If another process
// holds the file, that first use fails after opts.File.LockTimeout with an
// error wrapping persist.ErrLocked. If another cache or DB of this process
// holds it, the first use fails at once with persist.ErrOpenInProcess.
// Every later use fails with the same error.
func New(config *rest.Config, cacheOpts cache.Options, opts Options) (*Cache, error) {
	if cacheOpts.NewInformer != nil {
		return nil, errors.New("boltinformer: cache.Options.NewInformer is already set; the persistent cache sets it itself")
	}
	if opts.DB == nil && opts.Path == "" {
		return nil, errors.New("boltinformer: Options.Path (or Options.DB) is required")
	}
	if cacheOpts.Scheme == nil {
		cacheOpts.Scheme = scheme.Scheme // as cache.New defaults it
	}
	httpClient := cacheOpts.HTTPClient
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(config); err != nil {
			return nil, fmt.Errorf("could not create HTTP client from config: %w", err)
		}
	}
	// Every request of the cache's informers goes through this client. The
	// probe transport lets the adapter read what each informer lists, and
	// the fetch transport narrows a recovery's fetches (recovery.go).
	probing := *httpClient
	base := probing.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	probing.Transport = probeTransport{base: fetchTransport{base: base}}
	cacheOpts.HTTPClient = &probing
	recoveries, err := newRecoveries(config, &probing, opts.RecoverGroups)
	if err != nil {
		return nil, err
	}

	cluster := opts.Cluster
	if cluster == nil {
		if cluster, err = defaultCluster(config, &probing); err != nil {
			return nil, err
		}
	}
	byObject := map[objectKey]Object{}
	for obj, o := range opts.ByObject {
		gvk, err := gvkOf(obj, cacheOpts.Scheme)
		if err != nil {
			return nil, fmt.Errorf("boltinformer: Options.ByObject key %T: %w", obj, err)
		}
		byObject[objectKey{form: formOf(obj), gvk: gvk}] = o
	}

	c := &Cache{file: &cacheFile{path: opts.Path, metrics: opts.Metrics}, scheme: cacheOpts.Scheme}
	if opts.DB != nil {
		c.file.db.Store(opts.DB)
	} else {
		c.file.opts = opts.File
		c.file.opts.Scheme = CodecScheme(cacheOpts.Scheme)
		c.file.opts.ReadOnly = false
	}
	c.informer = &informers{
		file:       c.file,
		scheme:     cacheOpts.Scheme,
		opts:       opts,
		byObject:   byObject,
		cluster:    cluster,
		recoveries: recoveries,
		live:       map[string]*informer{},
	}
	cacheOpts.NewInformer = c.informer.newInformer
	inner, err := cache.New(config, cacheOpts)
	if err != nil {
		return nil, err
	}
	c.Cache = inner
	return c, nil
}

// Start opens the cache file unless an informer built before did. It runs
// the cache until ctx ends, then closes the file once every informer has
// stopped and flushed. If the file cannot be opened, Start returns the
// error at once and the cache does not run. A cache runs once, as
// controller-runtime's cache refuses a second Start. A later call,
// concurrent or after the first returned, returns an error at once. It
// leaves the running cache and its file alone.
func (c *Cache) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		// The embedded Start is not called, because the call that runs it
		// must be the one that closes the file. That holds whichever of two
		// concurrent calls came first. The message has controller-runtime's
		// words, which its own suite checks for.
		return errors.New("boltinformer: informer already started: a cache runs once")
	}
	var err error
	if _, err = c.file.get(); err == nil {
		err = c.Cache.Start(ctx)
	}
	if cerr := c.file.close(); err == nil {
		err = cerr
	}
	return err
}

// Get implements client.Reader, opening the cache file first if needed
// (see New).
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, err := c.file.get(); err != nil {
		return err
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

// List implements client.Reader, opening the cache file first if needed
// (see New).
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, err := c.file.get(); err != nil {
		return err
	}
	return c.Cache.List(ctx, list, opts...)
}

// GetInformer implements cache.Informers, opening the cache file first if
// needed (see New).
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if _, err := c.file.get(); err != nil {
		return nil, err
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

// GetInformerForKind implements cache.Informers, opening the cache file
// first if needed (see New).
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if _, err := c.file.get(); err != nil {
		return nil, err
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// IndexField implements client.FieldIndexer, opening the cache file first
// if needed (see New).
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extractValue client.IndexerFunc) error {
	if _, err := c.file.get(); err != nil {
		return err
	}
	return c.Cache.IndexField(ctx, obj, field, extractValue)
}

// RemoveInformer removes the informers of obj's type, as controller-runtime
// does. It returns once they have released their collections, so that the
// type can be added again right away.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if err := c.Cache.RemoveInformer(ctx, obj); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return err
	}
	return c.informer.release(ctx, objectKey{form: formOf(obj), gvk: gvk})
}

// NeedLeaderElection reports false, because the persistent cache runs on
// every replica, like controller-runtime's cache.
func (c *Cache) NeedLeaderElection() bool { return false }

// DB returns the cache file, Options.DB or the file opened from
// Options.Path. It is nil until the file is opened (see New), and the file
// is closed once Start returned.
func (c *Cache) DB() *persist.DB { return c.file.db.Load() }

// releaseTimeout bounds how long building an informer waits for a previous
// informer of the same list to release its collection when RemoveInformer
// did not already wait.
const releaseTimeout = 30 * time.Second

// warnMemoryOnly reports an informer that could not be made persistent.
func warnMemoryOnly(err error, what string) {
	utilruntime.HandleError(fmt.Errorf("boltinformer: %s is kept in memory only and will list at every start: %w", what, err))
}
