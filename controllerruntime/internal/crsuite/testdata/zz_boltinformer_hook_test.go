// This file is not built in boltinformer's module (it is under testdata):
// the harness in internal/crsuite copies it into a patched copy of
// controller-runtime's pkg/cache and pkg/controller (renaming the package
// for the latter), beside each package's own tests, where it routes every
// cache the suite builds with cache.New through boltinformer's persistent
// cache (boltcr).

package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/persist"
)

// The harness's settings, from the environment.
const (
	// modeEnv is "cold" (every cache on a new file) or "warm" (a cache
	// takes the first file no cache that has not stopped was given, so it
	// reopens what an earlier spec's cache left).
	modeEnv = "BOLTCR_SUITE_MODE"
	// dirEnv is the directory of the cache files and of routing.json.
	dirEnv = "BOLTCR_SUITE_DIR"
)

var (
	suiteMode = os.Getenv(modeEnv)
	suiteDir  = os.Getenv(dirEnv)
	files     cacheFiles
	routes    routing
	// inBoltcr is set while boltcr.New runs: the cache.New it calls is
	// the cache it wraps, counted as its own.
	inBoltcr atomic.Int32
)

// heartbeatOnce starts the cluster heartbeat with the first cache of a
// warm run.
var heartbeatOnce sync.Once

// startHeartbeat renews a Lease in kube-node-lease every 200 ms for the rest
// of the suite, as kubelets and leader-elected controllers renew theirs in
// every live cluster. envtest's apiserver is otherwise idle, and a warm
// cache catches up through the apiserver's bookmark only once etcd moves
// after its watch opened (reflector.CatchUp); in an idle etcd it relists
// after five short watches, which makes a warm run of this suite take
// about half an hour. The Lease is in a namespace no spec watches. A cold
// run needs none, and has none: the goroutine would fail pkg/controller's
// goroutine leak specs.
func startHeartbeat(cfg *rest.Config) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		panic(fmt.Sprintf("boltinformer hook: heartbeat client: %v", err))
	}
	go func() {
		ctx := context.Background()
		leases := cs.CoordinationV1().Leases("kube-node-lease")
		name := "boltinformer-suite-heartbeat"
		for range time.Tick(200 * time.Millisecond) {
			now := metav1.NewMicroTime(time.Now())
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{RenewTime: &now}}, metav1.CreateOptions{})
				continue
			}
			l.Spec.RenewTime = &now
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
}

func init() {
	if (suiteMode != "cold" && suiteMode != "warm") || suiteDir == "" {
		panic(fmt.Sprintf("boltinformer hook: set %s to cold or warm and %s to a directory (got %q, %q)", modeEnv, dirEnv, suiteMode, suiteDir))
	}
	cache.NewHook = newPersistentCache
}

// newPersistentCache is cache.New for the suite: boltcr.New over a cache
// file, except for a cache whose Options.NewInformer is set. boltcr sets
// it for the cache it wraps; a spec that sets it has chosen its own
// informers (boltcr would refuse), so that cache is controller-runtime's.
func newPersistentCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	if opts.NewInformer != nil {
		if inBoltcr.Load() == 0 {
			routes.add(func(r *route) { r.Default++ })
		}
		return cache.NewUnhooked(cfg, opts)
	}
	if suiteMode == "warm" {
		heartbeatOnce.Do(func() { startHeartbeat(cfg) })
	}
	inBoltcr.Add(1)
	defer inBoltcr.Add(-1)
	return files.open(func(path string, reopened bool) (*boltcr.Cache, error) {
		c, err := boltcr.New(cfg, opts, boltcr.Options{Path: path, File: persist.Options{NoSync: true}})
		if err != nil {
			return nil, err
		}
		routes.add(func(r *route) {
			if reopened {
				r.Reopened++
			} else {
				r.New++
			}
		})
		return c, nil
	})
}

// cacheFiles hands out cache files. In cold mode every cache gets a new
// one. In warm mode a cache gets the first file, in the order they were
// made, whose last cache has stopped (its Start returned), and a new one
// only if there is none. A cache holds its file from its Start or first
// informer until its Start returns, so a cache never started keeps its
// file out of use for the rest of the suite.
type cacheFiles struct {
	mu   sync.Mutex
	busy []bool // by file: file-<i>.db was given to a cache not stopped
}

func (f *cacheFiles) open(build func(path string, reopened bool) (*boltcr.Cache, error)) (cache.Cache, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := -1
	if suiteMode == "warm" {
		i = slices.Index(f.busy, false)
	}
	reopened := i >= 0
	if !reopened {
		i = len(f.busy)
		f.busy = append(f.busy, false)
	}
	c, err := build(f.path(i), reopened)
	if err != nil {
		return nil, err // an untyped nil, as cache.New
	}
	f.busy[i] = true
	return &trackedCache{Cache: c, stopped: func() {
		f.mu.Lock()
		f.busy[i] = false
		f.mu.Unlock()
	}}, nil
}

// trackedCache frees its file for the next cache once the Start that ran
// it (the first; boltcr refuses the others) returned, and so closed the file.
type trackedCache struct {
	*boltcr.Cache
	started atomic.Bool
	stopped func()
}

func (c *trackedCache) Start(ctx context.Context) error {
	if c.started.CompareAndSwap(false, true) {
		defer c.stopped()
	}
	return c.Cache.Start(ctx)
}

func (f *cacheFiles) path(i int) string {
	return filepath.Join(suiteDir, fmt.Sprintf("file-%d.db", i))
}

// route counts the caches a spec built: on boltcr over a new file, on
// boltcr over a file an earlier cache left, and on controller-runtime's
// cache (Options.NewInformer set).
type route struct {
	New      int `json:"boltcrNewFile"`
	Reopened int `json:"boltcrReopenedFile"`
	Default  int `json:"controllerRuntime"`
}

// routing is route by spec (its full text), written to routing.json
// after the suite.
type routing struct {
	mu    sync.Mutex
	specs map[string]*route
}

func (r *routing) add(count func(*route)) {
	name := CurrentSpecReport().FullText()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = map[string]*route{}
	}
	if r.specs[name] == nil {
		r.specs[name] = &route{}
	}
	count(r.specs[name])
}

var _ = ReportAfterSuite("boltinformer routing", func(Report) {
	routes.mu.Lock()
	b, err := json.MarshalIndent(routes.specs, "", "  ")
	routes.mu.Unlock()
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(suiteDir, "routing.json"), b, 0o644); err != nil {
		panic(err)
	}
})
