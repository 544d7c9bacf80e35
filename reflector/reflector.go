// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/reflector.go
// The ports are listed in hack/upstream-versions.txt.

package reflector

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults, copied from client-go v0.37.2 tools/cache/reflector.go.
const (
	defaultMinWatchTimeout = 5 * time.Minute
	defaultBackoffInit     = 800 * time.Millisecond
	defaultBackoffMax      = 30 * time.Second
	defaultBackoffReset    = 2 * time.Minute
	defaultBackoffFactor   = 2.0
	defaultBackoffJitter   = 1.0

	// minWatchTimeoutFloor keeps TimeoutSeconds above zero. A zero timeout
	// means the server's default, not a tiny one.
	minWatchTimeoutFloor = time.Second

	defaultExpectedTypeName = "<unspecified>"

	// watchFailuresBeforeRelist is how many watches in a row may fail before
	// the reflector relists. A failure is a watch that could not start or
	// ended with an error. Connection refused and 429 do not count, because
	// client-go retries them without relisting. client-go relists after the
	// first failure. One retry from LastSyncResourceVersion spares a list
	// when the failure was a passing one. A watch the server keeps refusing
	// (RBAC without the watch verb) must still not leave the store unsynced.
	// Nor may a proxy that ends every watch at once leave it frozen.
	watchFailuresBeforeRelist = 2
)

// Store is the subset of client-go's RealFIFO the reflector writes to. A
// *cache.RealFIFO satisfies it. Resync comes from the resync goroutine,
// concurrently with the other methods, so an implementation must be safe
// for concurrent use, as RealFIFO is. A Store that also implements
// cache.ResourceVersionUpdater is told every resourceVersion the reflector
// records, exactly as client-go does.
type Store interface {
	Add(obj interface{}) error
	Update(obj interface{}) error
	Delete(obj interface{}) error
	// Replace receives the complete list and its resourceVersion. The Store
	// takes ownership of the slice.
	Replace(list []interface{}, resourceVersion string) error
	Resync() error
	Bookmark(resourceVersion string) error
}

var _ Store = (*cache.RealFIFO)(nil)

// Options configures a Reflector. New copies it, so later changes have no
// effect. Every zero value is a usable default.
type Options struct {
	// Name appears in logs and errors. Zero means the type description
	// derived from ExpectedGVK or ExpectedType, such as "*v1.Pod" or
	// "/v1, Kind=Pod", or "<unspecified>" when both are nil.
	Name string

	// ExpectedType is an example of the objects the store accepts. A watch
	// event whose object has another Go type is skipped, as client-go skips
	// it, and reported to WatchErrorHandler as ErrUnexpectedObject. Nil
	// accepts any type.
	ExpectedType runtime.Object

	// ExpectedGVK is checked against every runtime.Unstructured event
	// object, and a mismatch is reported and skipped. Typed objects are not
	// checked, because clientsets decode them with an empty TypeMeta. Nil
	// derives it, as client-go does, from an ExpectedType that is an
	// *unstructured.Unstructured with apiVersion and kind set. Otherwise
	// nothing checks the GVK.
	ExpectedGVK *schema.GroupVersionKind

	// ResumeResourceVersion, when non-empty, makes the first ListAndWatch
	// skip the list and watch from this resourceVersion.
	// LastSyncResourceVersion returns it from New on. The server may answer
	// that it is expired (410 Gone or Expired, as an HTTP status or an
	// in-stream ERROR event). The reflector then relists for data no older
	// than it, and falls back to "" if refused again. A version too large,
	// or one the server cannot parse, relists at "", a consistent read. Zero
	// means a cold start that lists first. So does "0", which names no point
	// in history.
	ResumeResourceVersion string

	// ListFrom, used only without ResumeResourceVersion, makes the first
	// list ask for data no older than this resourceVersion instead of "0".
	// If the version is expired, too large or not one
	// the server can parse, the list falls back to a consistent read at "".
	// The list is reported as CauseRelistError. A store that has applied
	// watch events up to ListFrom must not list anything older, and a list
	// at "0" may be served by a lagging watch cache.
	ListFrom string

	// PageSize is the Limit of each list page. Zero means client-go's choice
	// (see Reflector.list). Lists at "" and "0" then get pager.PageSize, 500.
	// Lists at a specific resourceVersion are not paged, so the watch cache
	// can serve them. They get 500 too once a list at "0" came back
	// paginated, which means the watch cache is disabled. A paged list at a
	// specific resourceVersion asks for NotOlderThan. client-go's asks for
	// no match, and kube-apiserver then reads exactly that old version from
	// etcd. Negative values panic.
	PageSize int64

	// ResyncPeriod is how often ShouldResync is consulted while watching,
	// and Store.Resync called if it says so. Zero means never. Negative
	// values panic.
	ResyncPeriod time.Duration

	// ShouldResync is consulted every ResyncPeriod. Nil always resyncs.
	ShouldResync func() bool

	// MinWatchTimeout bounds each watch request's TimeoutSeconds, which is
	// random in [MinWatchTimeout, 2*MinWatchTimeout) to spread re-watches.
	// Zero means 5 minutes. Values under one second are raised to one
	// second. Unlike client-go, values under 5 minutes are honoured.
	// Negative values panic.
	MinWatchTimeout time.Duration

	// InitialBackoff, MaxBackoff and BackoffReset shape the exponential
	// backoff (factor 2, jitter 1.0) between ListAndWatch attempts and
	// between watch retries. Zero means client-go's 800ms, 30s and
	// 2m. The backoff restarts from InitialBackoff once BackoffReset has
	// passed since the current sequence began. Negative values panic.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	BackoffReset   time.Duration

	// Clock drives the backoff, resync and watch-duration timers. Nil means
	// the real clock.
	Clock clock.Clock

	// WatchErrorHandler is called whenever a list or watch fails or ends
	// with an error, and for every skipped event and failed Store write.
	// Calls come on the reflector's goroutine and must return quickly. A
	// watch that closes normally or times out is not reported, nor is a
	// cancelled context. Nil logs as client-go's
	// DefaultWatchErrorHandler and watch loop do. Expired is at V(4). A
	// watch start that failed with io.EOF itself is silent, and one with
	// io.ErrUnexpectedEOF itself is at V(1), as client-go compares both
	// exactly. A failed list is reported whatever it wraps. A watch start
	// refused or answered 429 is at V(4). A watch that ended with 429 or an
	// internal error is at V(2). Everything else goes through
	// utilruntime.HandleErrorWithContext.
	WatchErrorHandler func(ctx context.Context, err error)

	// Observer receives lifecycle callbacks for metrics and tests. Nil means
	// none.
	Observer Observer

	// ListAfter, when non-nil, is called once a full list has been made.
	// The list's Store.Replace waits until the returned channel is closed or
	// the context ends. The list request itself is made at once. Watches and
	// a Relister's lists are not held, since a recovery's store orders its
	// writes per key itself. A warm-starting informer returns the
	// end of its delivery of the stored state to its handlers. A relist
	// after a 410 must not overtake that delivery. Calling ListAfter resumes
	// the delivery if it was held back. Listing meanwhile overlaps the
	// apiserver's work and the transfer with the delivery
	// (docs/benchmarks.md).
	ListAfter func() <-chan struct{}

	// CatchUp, when set, keeps watches short until the caller's store has
	// caught up with a consistent read (see CatchUp). Nil means watches last
	// MinWatchTimeout as usual.
	CatchUp *CatchUp

	// Relister, when set, makes every list after the first in place of a
	// full list. Such lists follow an expired or too large resourceVersion,
	// serve ListFrom, or end a failed catch-up. Package recovery's Relister
	// recovers only what changed. Nil means such lists are full lists, as
	// client-go's are.
	Relister Relister
	// PagedList, when set, takes a cold start's first list a page at a time
	// instead of through Store.Replace. A cold start has neither
	// ResumeResourceVersion nor ListFrom. The list is a consistent read at
	// resourceVersion "" in pages of PageSize items, or of
	// DefaultPagedListPageSize if that is zero. Each page is handed over as it arrives, then
	// the list's resourceVersion (see PagedList). If that list fails, the
	// next is an ordinary consistent read through Store.Replace. Nil sends
	// every list to Store.Replace.
	PagedList PagedList
}

// StartCause says why the reflector (re)established its view of the
// collection.
type StartCause string

const (
	// CauseCold is the first list of a reflector without
	// ResumeResourceVersion, or a retry of that list after it failed.
	CauseCold StartCause = "cold"
	// CauseResumed is the first watch from ResumeResourceVersion, made
	// without a list.
	CauseResumed StartCause = "resumed"
	// CauseRelistExpired is a list after the server answered that the
	// watched resourceVersion is expired or too large.
	CauseRelistExpired StartCause = "relist-expired"
	// CauseRelistCatchUp is a list at "" because short watches did not
	// bring the store up to a CatchUp read. The server may send no
	// bookmarks, its watch cache may lag, or the watches may fail.
	CauseRelistCatchUp StartCause = "relist-catchup"
	// CauseRelistError is any other later list. It follows two failed
	// watches in a row or a failed Store.Resync, and client-go relists after
	// both. It is also a list by ListAndWatch called again after it
	// returned, and the first list of a reflector given Options.ListFrom.
	CauseRelistError StartCause = "relist-error"
)

// Observer receives lifecycle callbacks. Calls are made synchronously from
// the goroutine running Run or ListAndWatch. They are never concurrent with
// each other, and must return quickly. No lock is held during a call, so an
// Observer may call LastSyncResourceVersion.
type Observer interface {
	// Resumed is called once, when the first ListAndWatch starts watching
	// from ResumeResourceVersion without listing (CauseResumed).
	Resumed(resourceVersion string)
	// Listed is called after a successful list and Store.Replace. It gets
	// the number of items and of list responses (pages) in the result.
	Listed(cause StartCause, resourceVersion string, items int, pages int)
	// WatchStarted is called for each watch request the server accepted.
	WatchStarted(resourceVersion string)
	// WatchEnded is called once per WatchStarted, with the error that ended
	// the watch. The error is nil when the watch closed or timed out
	// normally, or the context was cancelled.
	WatchEnded(err error)
}

type nopObserver struct{}

func (nopObserver) Resumed(string)                      {}
func (nopObserver) Listed(StartCause, string, int, int) {}
func (nopObserver) WatchStarted(string)                 {}
func (nopObserver) WatchEnded(error)                    {}

// Reflector keeps a Store in step with a collection on the server by
// listing and watching it, and may start from a stored resourceVersion. See
// the package documentation.
type Reflector struct {
	// Immutable after New.
	name            string
	typeDescription string
	lw              cache.ListerWatcherWithContext
	store           Store
	expectedType    reflect.Type // nil: any
	expectedGVK     *schema.GroupVersionKind
	pageSize        int64
	resyncPeriod    time.Duration
	shouldResync    func() bool
	minWatchTimeout time.Duration
	maxWatchTimeout time.Duration
	clock           clock.Clock
	// delay returns the next backoff interval. It is client-go's
	// backoffManager, which locks internally and is safe from any goroutine.
	delay        wait.DelayFunc
	errorHandler func(ctx context.Context, err error)
	observer     Observer
	listAfter    func() <-chan struct{}
	catchUp      *CatchUp // nil: none
	relister     Relister // nil: none
	pagedList    PagedList
	// catchUpTimeout and catchUpWatches are catchUp's completed values.
	catchUpTimeout time.Duration
	catchUpWatches int

	// catchUpTarget calls CatchUp.Target once.
	catchUpTarget sync.Once
	// The fields up to mu are used only by the goroutine running Run or
	// ListAndWatch.
	//
	// shortWatches counts short watches ended while catching up.
	shortWatches int
	// catchUpSettled is set by a list that settled the catch-up (see
	// catchUpListed). Watches are ordinary from then on.
	catchUpSettled bool
	// watchFailures counts the watches in a row that failed to start or
	// ended with an error without delivering an event. See
	// watchFailuresBeforeRelist.
	watchFailures int
	// listInFull makes lists full lists until a watch opens, which clears
	// it. A Relister sets it when a relist ended without its watch opening.
	listInFull bool
	// relisted is the Relister's list going on while the watch runs. Nil
	// means none.
	relisted *Relisted
	// pagedListTried is set once the PagedList has been given a list.
	pagedListTried bool
	// resumedWatch is set while the watch from ResumeResourceVersion is the
	// next to be requested. listAtOnce is set when that watch, or one made
	// after a backoff wait, found its resourceVersion unavailable before
	// any event. Run then lists without backing off
	// first (see Run).
	resumedWatch, listAtOnce bool

	// mu guards every field below. It is never held while calling the
	// Store, the ListerWatcher, the Observer or the error handler.
	mu sync.RWMutex
	// lastSyncRV is the resourceVersion of the last list or watch event
	// recorded. As in client-go, it is not synchronized with the Store.
	lastSyncRV string
	// lastSyncRVUnavailable is true after the server refused lastSyncRV as
	// unavailable, and the next list then uses "". It is client-go's
	// isLastSyncResourceVersionUnavailable.
	lastSyncRVUnavailable bool
	// resumePending is true until the first ListAndWatch has consumed
	// ResumeResourceVersion.
	resumePending bool
	// nextListCause is the StartCause reported for the next successful list.
	nextListCause StartCause
	// paginatedResult is set when a list at "0" came back paginated, which
	// means the watch cache is off. Later lists then keep paging, as with
	// client-go's paginatedResult.
	paginatedResult bool
}

// New returns a Reflector that writes lw's collection into store. It
// panics on API misuse: a nil lw or store, or a negative numeric option.
func New(lw cache.ListerWatcher, store Store, opts Options) *Reflector {
	if lw == nil || store == nil {
		panic("reflector.New: nil ListerWatcher or Store")
	}
	if opts.PageSize < 0 || opts.ResyncPeriod < 0 || opts.MinWatchTimeout < 0 ||
		opts.InitialBackoff < 0 || opts.MaxBackoff < 0 || opts.BackoffReset < 0 {
		panic("reflector.New: negative PageSize or duration in Options")
	}

	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	minWatch := opts.MinWatchTimeout
	if minWatch == 0 {
		minWatch = defaultMinWatchTimeout
	}
	minWatch = max(minWatch, minWatchTimeoutFloor)

	initBackoff := cmp.Or(opts.InitialBackoff, defaultBackoffInit)
	maxBackoff := cmp.Or(opts.MaxBackoff, defaultBackoffMax)
	resetBackoff := cmp.Or(opts.BackoffReset, defaultBackoffReset)
	// Same shape as client-go's NewReflectorWithOptions default backoff.
	backoff := wait.Backoff{
		Duration: initBackoff,
		Cap:      maxBackoff,
		Steps:    int(math.Ceil(float64(maxBackoff) / float64(initBackoff))),
		Factor:   defaultBackoffFactor,
		Jitter:   defaultBackoffJitter,
	}

	expectedGVK := opts.ExpectedGVK
	if expectedGVK == nil {
		expectedGVK = expectedGVKFromObject(opts.ExpectedType)
	} else {
		gvk := *expectedGVK // copy: Options is frozen at New
		expectedGVK = &gvk
	}
	typeDescription := typeDescriptionFromObject(opts.ExpectedType)
	if opts.ExpectedGVK != nil {
		typeDescription = opts.ExpectedGVK.String()
	}
	name := opts.Name
	if name == "" {
		name = typeDescription
	}

	r := &Reflector{
		name:            name,
		typeDescription: typeDescription,
		lw:              cache.ToListerWatcherWithContext(lw),
		store:           store,
		expectedGVK:     expectedGVK,
		pageSize:        opts.PageSize,
		resyncPeriod:    opts.ResyncPeriod,
		shouldResync:    opts.ShouldResync,
		minWatchTimeout: minWatch,
		maxWatchTimeout: 2 * minWatch,
		clock:           c,
		delay:           backoff.DelayWithReset(c, resetBackoff),
		errorHandler:    opts.WatchErrorHandler,
		observer:        opts.Observer,
		listAfter:       opts.ListAfter,
		pagedList:       opts.PagedList,
		nextListCause:   CauseCold,
	}
	if cu := opts.CatchUp; cu != nil {
		if cu.Done == nil || cu.WatchTimeout < 0 || cu.MaxWatches < 0 {
			panic("reflector.New: CatchUp needs Done, and no negative WatchTimeout or MaxWatches")
		}
		c := *cu // copy: Options is frozen at New
		r.catchUp = &c
		r.catchUpTimeout = cmp.Or(cu.WatchTimeout, DefaultCatchUpWatchTimeout)
		r.catchUpWatches = cmp.Or(cu.MaxWatches, DefaultCatchUpWatches)
	}
	if opts.ExpectedType != nil {
		r.expectedType = reflect.TypeOf(opts.ExpectedType)
	}
	r.relister = opts.Relister
	if r.errorHandler == nil {
		r.errorHandler = r.defaultErrorHandler
	}
	if r.observer == nil {
		r.observer = nopObserver{}
	}
	if rv := opts.ResumeResourceVersion; rv != "" && rv != "0" {
		r.lastSyncRV = rv
		r.resumePending = true
	} else if rv := opts.ListFrom; rv != "" && rv != "0" {
		r.lastSyncRV = rv
		r.nextListCause = CauseRelistError
	}
	return r
}

// Run calls ListAndWatch until ctx is done. As client-go's RunWithContext
// does, it makes the first attempt at once and waits a sliding backoff
// interval between the others. Two kinds of relist skip that wait. In one,
// the first watch from ResumeResourceVersion found that version expired or
// too large. A cold start would make that list, or recovery, at once too.
// In the other, a watch made after a backoff wait found its version so.
// That relist has already waited its interval. Errors go to
// Options.WatchErrorHandler. Run returns only after every goroutine it
// started has exited. Run must not run concurrently with itself or with
// ListAndWatch.
func (r *Reflector) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.V(3).Info("Starting reflector", "reflector", r.name, "type", r.typeDescription, "resyncPeriod", r.resyncPeriod)
	defer logger.V(3).Info("Stopping reflector", "reflector", r.name, "type", r.typeDescription)
	for ctx.Err() == nil {
		if err := r.ListAndWatch(ctx); err != nil {
			r.errorHandler(ctx, err)
		}
		if r.listAtOnce {
			// The start's own watch may have found its resourceVersion
			// gone. This process has just started and must list at once,
			// as a cold start does. Or a watch made after a backoff wait
			// found it gone, and that wait was the one before the
			// relist. The backoff spreads the relists of running clients
			// that all lose their watches at once, as in an apiserver
			// restart. Clients that start together list together, whether
			// they resume or not.
			r.listAtOnce = false
			continue
		}
		if !r.sleep(ctx) {
			return
		}
	}
}

// ListAndWatch makes one attempt. It lists, unless this is the first call
// and ResumeResourceVersion was given. Then it watches until ctx is done or
// a relist is due. A relist is due when the server says the watched
// resourceVersion is expired or too large, or after two failed watches in
// a row (see the package documentation). Catching up may call for one too
// (see CatchUp), and so does a failed Store.Resync. A single watch failure
// is retried inside, with backoff, from LastSyncResourceVersion. Connection
// refused and 429 are retried there without limit. It returns nil when ctx
// is done or a relist is due. It returns ErrList or ErrStore when the list
// or the store failed. It must not be called concurrently with itself or
// Run.
func (r *Reflector) ListAndWatch(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	finish := func() error { return nil }
	if rv, ok := r.takeResume(); ok {
		logger.V(2).Info("Resuming watch without listing", "reflector", r.name, "type", r.typeDescription, "resourceVersion", rv)
		r.observer.Resumed(rv)
		r.resumedWatch = true
	} else {
		logger.V(3).Info("Listing and watching", "reflector", r.name, "type", r.typeDescription)
		var err error
		// A Relister's list (relist.go) may go on while the watch runs.
		if ctx, finish, err = r.listOrRelist(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return finish()
		}
		logger.V(2).Info("Caches populated", "reflector", r.name, "type", r.typeDescription)
	}
	err := r.watchWithResync(ctx)
	if ferr := finish(); err == nil {
		err = ferr
	}
	return err
}

// LastSyncResourceVersion is the resourceVersion of the last list or watch
// event the reflector handed to the Store. Before anything was received, it
// is ResumeResourceVersion. Like client-go's, it is not synchronized with
// the Store. The Store may not have applied that event yet.
func (r *Reflector) LastSyncResourceVersion() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastSyncRV
}

func (r *Reflector) setLastSyncResourceVersion(rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncRV = rv
}

// takeResume consumes the pending resume, if any. After it, lists are
// reported as CauseRelistError unless something sets a more specific cause.
func (r *Reflector) takeResume() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.resumePending {
		return "", false
	}
	r.resumePending = false
	r.nextListCause = CauseRelistError
	return r.lastSyncRV, true
}

// requestRelist records that the watched resourceVersion cannot be served,
// which makes the next ListAndWatch list. As in client-go's watch loop, an
// expired version is not marked unavailable. The relist asks for data no
// older than lastSyncRV. It is unpaged unless PageSize is set, so the watch
// cache serves it and spares etcd after an apiserver restart. It falls
// back to a consistent read at "" only if that list is refused too. A
// version too large, or one the server cannot parse, goes to "" at once.
func (r *Reflector) requestRelist(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextListCause = CauseRelistExpired
	if isTooLargeResourceVersionError(err) || isInvalidResourceVersionError(err) {
		r.lastSyncRVUnavailable = true
	}
}

// requestRelistAfterWatchFailures makes the next ListAndWatch list after
// watches failed (see watchFailed). The list is at LastSyncResourceVersion,
// as client-go's relist after a watch error is.
func (r *Reflector) requestRelistAfterWatchFailures() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextListCause = CauseRelistError
}

// markResourceVersionUnavailable records that the server cannot serve
// lastSyncRV, so the next list is a consistent read at "".
func (r *Reflector) markResourceVersionUnavailable(cause StartCause) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncRVUnavailable = true
	r.nextListCause = cause
}

// relistResourceVersionLocked mirrors client-go's relistResourceVersion. It
// is "", a consistent read, once the server refused lastSyncRV as
// unavailable. It is "0" for the very first list, which the watch cache
// serves. Otherwise it is lastSyncRV, for data no older than what was seen.
func (r *Reflector) relistResourceVersionLocked() string {
	if r.lastSyncRVUnavailable {
		return ""
	}
	if r.lastSyncRV == "" {
		return "0"
	}
	return r.lastSyncRV
}

func (r *Reflector) relistResourceVersion() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.relistResourceVersionLocked()
}

// sleep waits one backoff interval, and returns false if ctx ended first.
// The timer is stopped either way, so cancellation leaves nothing behind.
func (r *Reflector) sleep(ctx context.Context) bool {
	t := r.clock.NewTimer(r.delay())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// watchTimeoutSeconds is random in [min, max), as in client-go's watch.
func (r *Reflector) watchTimeoutSeconds() int64 {
	lo, hi := r.minWatchTimeout.Seconds(), r.maxWatchTimeout.Seconds()
	return int64(lo + rand.Float64()*(hi-lo))
}

// defaultErrorHandler logs as client-go does. It applies client-go's
// DefaultWatchErrorHandler to the error client-go's handler would get. It
// adds the lines client-go's watch loop writes for the errors it retries,
// which this package routes through the handler. client-go's handler
// compares the error itself with io.EOF and io.ErrUnexpectedEOF. A failed
// list reaches it wrapped ("failed to list"), so it is always reported.
// Only a watch whose start failed with either of them, bare, is quiet or
// at V(1).
func (r *Reflector) defaultErrorHandler(ctx context.Context, err error) {
	logger := klog.FromContext(ctx)
	var start *watchStartError
	switch {
	case errors.Is(err, ErrUnexpectedObject):
		utilruntime.HandleErrorWithContext(ctx, err, "Unexpected watch event object", "reflector", r.name, "type", r.typeDescription)
	case errors.Is(err, ErrStore):
		utilruntime.HandleErrorWithContext(ctx, err, "Store rejected reflector update", "reflector", r.name, "type", r.typeDescription)
	case errors.As(err, &start) && isRetriableWatchError(start.cause):
		// client-go's watch loop retries these without calling its handler.
		logger.V(4).Info("Watch failed - backing off", "reflector", r.name, "type", r.typeDescription, "err", err)
	case errors.As(err, &start):
		r.handleLikeClientGo(ctx, start.cause, err)
	case errors.Is(err, ErrWatch) && apierrors.IsTooManyRequests(err):
		logger.V(2).Info("Watch returned 429 - backing off", "reflector", r.name, "type", r.typeDescription)
	case errors.Is(err, ErrWatch) && utilnet.IsConnectionRefused(err):
		logger.V(4).Info("Watch failed - backing off", "reflector", r.name, "type", r.typeDescription, "err", err)
	case errors.Is(err, ErrWatch) && apierrors.IsInternalError(err):
		logger.V(2).Info("Retrying watch after internal error", "reflector", r.name, "type", r.typeDescription, "err", err)
	default:
		r.handleLikeClientGo(ctx, err, err)
	}
}

// handleLikeClientGo is client-go's DefaultWatchErrorHandler given seen,
// the error client-go's handler would get. It logs err, this package's
// error. The comparisons with io.EOF and io.ErrUnexpectedEOF are exact, as
// client-go's are, so a wrapped one is reported.
func (r *Reflector) handleLikeClientGo(ctx context.Context, seen, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case isExpiredError(seen):
		logger.V(4).Info("Watch closed", "reflector", r.name, "type", r.typeDescription, "err", err)
	case seen == io.EOF:
		// watch closed normally
	case seen == io.ErrUnexpectedEOF:
		logger.V(1).Info("Watch closed with unexpected EOF", "reflector", r.name, "type", r.typeDescription, "err", err)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to watch", "reflector", r.name, "type", r.typeDescription)
	}
}

// typeDescriptionFromObject mirrors client-go's getTypeDescriptionFromObject.
func typeDescriptionFromObject(expectedType runtime.Object) string {
	if expectedType == nil {
		return defaultExpectedTypeName
	}
	desc := reflect.TypeOf(expectedType).String()
	obj, ok := expectedType.(*unstructured.Unstructured)
	if !ok || obj == nil {
		return desc
	}
	if gvk := obj.GroupVersionKind(); !gvk.Empty() {
		return gvk.String()
	}
	return desc
}

// expectedGVKFromObject mirrors client-go's getExpectedGVKFromObject.
func expectedGVKFromObject(expectedType runtime.Object) *schema.GroupVersionKind {
	obj, ok := expectedType.(*unstructured.Unstructured)
	if !ok || obj == nil {
		return nil
	}
	gvk := obj.GroupVersionKind()
	if gvk.Empty() {
		return nil
	}
	return &gvk
}
