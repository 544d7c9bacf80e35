package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/boltinformer/boltinformer/persist"
)

// NewCache returns a cache.NewCacheFunc for manager.Options.NewCache (or
// cluster.Options.NewCache): the manager's cache, with every informer
// persisted to the cache file opts names.
func NewCache(opts Options) cache.NewCacheFunc {
	return func(config *rest.Config, cacheOpts cache.Options) (cache.Cache, error) {
		c, err := New(config, cacheOpts, opts)
		if err != nil {
			// An untyped nil: a nil *Cache in the interface would not be == nil.
			return nil, err
		}
		return c, nil
	}
}

// Cache is controller-runtime's cache (cache.New) over boltinformer
// informers. It adds to the embedded cache: closing the file when Start
// returns, and a RemoveInformer that returns once the removed informers
// have released their collections.
type Cache struct {
	cache.Cache
	db       *persist.DB
	ownsDB   bool
	scheme   *runtime.Scheme
	informer *informers

	// started is set by the first Start, the only call that runs the
	// embedded cache and closes the file.
	started atomic.Bool
}

var _ cache.Cache = (*Cache)(nil)

// New is cache.New(config, cacheOpts) with persistent informers.
// cacheOpts.NewInformer must be unset: New sets it. If the cache file is
// held by another process, New fails with an error wrapping
// persist.ErrLocked after opts.File.LockTimeout.
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
	// Every request of the cache's informers goes through this client; the
	// probe transport lets the adapter read what each informer lists.
	probing := *httpClient
	base := probing.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	probing.Transport = probeTransport{base: base}
	cacheOpts.HTTPClient = &probing

	cluster := opts.Cluster
	if cluster == nil {
		var err error
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

	c := &Cache{db: opts.DB, scheme: cacheOpts.Scheme}
	if c.db == nil {
		fileOpts := opts.File
		fileOpts.Scheme = CodecScheme(cacheOpts.Scheme)
		fileOpts.ReadOnly = false
		db, err := persist.Open(opts.Path, fileOpts)
		if errors.Is(err, persist.ErrLocked) {
			return nil, fmt.Errorf("boltinformer: the cache file %s is in use by another process — another replica sharing the file, or a previous instance still stopping; give each replica its own file: %w", opts.Path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("boltinformer: opening the cache file: %w", err)
		}
		c.db, c.ownsDB = db, true
		if opts.Metrics != nil {
			opts.Metrics.ObserveDB(db)
		}
	}
	c.informer = &informers{
		db:       c.db,
		scheme:   cacheOpts.Scheme,
		opts:     opts,
		byObject: byObject,
		cluster:  cluster,
		live:     map[string]*informer{},
	}
	cacheOpts.NewInformer = c.informer.newInformer
	inner, err := cache.New(config, cacheOpts)
	if err != nil {
		c.closeDB()
		return nil, err
	}
	c.Cache = inner
	return c, nil
}

// Start runs the cache until ctx ends, then closes the cache file (once
// every informer has stopped and flushed). A cache runs once: a later call
// (concurrent, or after the first returned) returns an error at once and
// leaves the running cache and its file alone, as controller-runtime's
// cache refuses a second Start.
func (c *Cache) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		// Not calling the embedded Start: the call that runs it must be the
		// one that closes the file, whichever of two concurrent calls
		// reached it first. The message has controller-runtime's words,
		// which its own suite checks for.
		return errors.New("boltinformer: informer already started: a cache runs once")
	}
	err := c.Cache.Start(ctx)
	if cerr := c.closeDB(); err == nil {
		err = cerr
	}
	return err
}

func (c *Cache) closeDB() error {
	if !c.ownsDB {
		return nil
	}
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("boltinformer: closing the cache file: %w", err)
	}
	return nil
}

// RemoveInformer removes the informers of obj's type, as controller-runtime
// does, and returns once they have released their collections, so that the
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

// NeedLeaderElection reports false: like controller-runtime's cache, the
// persistent cache runs on every replica.
func (c *Cache) NeedLeaderElection() bool { return false }

// DB returns the cache file.
func (c *Cache) DB() *persist.DB { return c.db }

// releaseTimeout bounds how long building an informer waits for a previous
// informer of the same list to release its collection when RemoveInformer
// did not already wait.
const releaseTimeout = 30 * time.Second

// warnMemoryOnly reports an informer that could not be made persistent.
func warnMemoryOnly(err error, what string) {
	utilruntime.HandleError(fmt.Errorf("boltinformer: %s is kept in memory only and will list at every start: %w", what, err))
}
