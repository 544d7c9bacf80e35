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

	// minWatchTimeoutFloor keeps TimeoutSeconds above zero: a zero timeout
	// means "server default", not "tiny".
	minWatchTimeoutFloor = time.Second

	defaultExpectedTypeName = "<unspecified>"

	// watchFailuresBeforeRelist is how many watches in a row may fail to
	// start or end with an error (other than those client-go retries
	// without relisting: connection refused, 429) before the reflector
	// relists, as client-go does after the first. One retry from
	// LastSyncResourceVersion spares a list when the failure was a passing
	// one; a watch the server keeps refusing (RBAC without the watch verb)
	// or a proxy that ends every watch at once must not leave the store
	// unsynced or frozen.
	watchFailuresBeforeRelist = 2
)

// Store is the subset of client-go's RealFIFO the reflector writes to; a
// *cache.RealFIFO satisfies it. Resync is called from the resync goroutine,
// concurrently with the other methods, so implementations must be safe for
// concurrent use (RealFIFO is). If the Store also implements
// cache.ResourceVersionUpdater, it is told every resourceVersion the
// reflector records, exactly as client-go does.
type Store interface {
	Add(obj interface{}) error
	Update(obj interface{}) error
	Delete(obj interface{}) error
	// Replace receives the complete list and its resourceVersion; the Store
	// takes ownership of the slice.
	Replace(list []interface{}, resourceVersion string) error
	Resync() error
	Bookmark(resourceVersion string) error
}

var _ Store = (*cache.RealFIFO)(nil)

// Options configures a Reflector. It is copied by New; later changes have
// no effect. Every zero value is a usable default.
type Options struct {
	// Name appears in logs and errors. Zero: the type description derived
	// from ExpectedGVK or ExpectedType (for example "*v1.Pod" or
	// "/v1, Kind=Pod"), or "<unspecified>" when both are nil.
	Name string

	// ExpectedType is an example of the objects the store accepts. Watch
	// events whose object has another Go type are reported to
	// WatchErrorHandler (ErrUnexpectedObject) and skipped, as client-go
	// skips them. Nil: any type is accepted.
	ExpectedType runtime.Object

	// ExpectedGVK is checked against every *unstructured.Unstructured (any
	// runtime.Unstructured) event object; mismatches are reported and
	// skipped. Typed objects are not checked, because clientsets decode them
	// with an empty TypeMeta. Nil: derived from ExpectedType when that is an
	// *unstructured.Unstructured with apiVersion and kind set (as client-go);
	// otherwise no GVK check.
	ExpectedGVK *schema.GroupVersionKind

	// ResumeResourceVersion, when non-empty, makes the first ListAndWatch
	// skip the list and watch from this resourceVersion;
	// LastSyncResourceVersion returns it from New on. If the server answers
	// that it is expired (410 Gone/Expired, as an HTTP status or as an
	// in-stream ERROR event), too large, or not one it can parse, the
	// reflector relists with resourceVersion "" (a consistent read). Zero, and also "0" (which
	// names no point in history), mean a cold start: list first.
	ResumeResourceVersion string

	// ListFrom, used only without ResumeResourceVersion, makes the first
	// list ask for data no older than this resourceVersion (falling back to
	// a consistent read at "" if it is expired, too large or not one the
	// server can parse) instead of
	// "0", and reports it as CauseRelistError. A store that has already
	// applied watch events up to ListFrom must not list anything older: a
	// list at "0" may be served by a lagging watch cache.
	ListFrom string

	// PageSize is the Limit of each list page. Zero: client-go's choice
	// (see Reflector.list): pager.PageSize (500) for lists at "" and "0",
	// no paging for lists at a specific resourceVersion so the watch cache
	// can serve them, unless an earlier list at "0" came back paginated
	// (watch cache disabled), in which case 500. Negative values panic.
	PageSize int64

	// ResyncPeriod is how often, while watching, ShouldResync is consulted
	// and, if it says so, Store.Resync is called. Zero: never. Negative
	// values panic.
	ResyncPeriod time.Duration

	// ShouldResync is consulted every ResyncPeriod. Nil: always resync.
	ShouldResync func() bool

	// MinWatchTimeout bounds each watch request's TimeoutSeconds, which is
	// random in [MinWatchTimeout, 2*MinWatchTimeout) to spread re-watches.
	// Zero: 5 minutes. Values under one second are raised to one second.
	// Unlike client-go, values under 5 minutes are honoured. Negative
	// values panic.
	MinWatchTimeout time.Duration

	// InitialBackoff, MaxBackoff and BackoffReset shape the exponential
	// backoff (factor 2, jitter 1.0) used between ListAndWatch attempts and
	// between watch retries. Zero: client-go's 800ms, 30s and 2m. The
	// backoff restarts from InitialBackoff once BackoffReset has passed since
	// the current backoff sequence began. Negative values panic.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	BackoffReset   time.Duration

	// Clock drives timers (backoff, resync, watch durations). Nil: the real
	// clock.
	Clock clock.Clock

	// WatchErrorHandler is called, on the reflector's goroutine, whenever a
	// list or watch fails or ends with an error, and for every skipped event
	// or failed Store write; it must return quickly. It is not called when a
	// watch closes normally or times out, nor when the context is
	// cancelled. Nil: log like client-go's DefaultWatchErrorHandler
	// (expired at V(4), io.EOF silent, io.ErrUnexpectedEOF at V(1), watch
	// 429 at V(2), watch connection refused at V(4), everything else through
	// utilruntime.HandleErrorWithContext).
	WatchErrorHandler func(ctx context.Context, err error)

	// Observer receives lifecycle callbacks for metrics and tests. Nil: none.
	Observer Observer

	// ListAfter, when non-nil, is called once a full list has been made,
	// and its Store.Replace waits until the channel it returns is closed or
	// the context ends; the list request is made at once, and watches and
	// a Relister's lists are not held (a recovery's store orders its writes
	// per key itself). A warm-starting informer returns the end of its
	// delivery of the stored state to its handlers, which a relist after a
	// 410 must not overtake (and which, asked for, goes on if it was held
	// back). Listing meanwhile overlaps the apiserver's work and
	// the transfer with that delivery: a restart after a 410 at 10,000
	// Pods (informerbench, bolt-410) synced in 1.10 s instead of 1.55 s
	// with the list held, beside client-go's cold start in 0.86 s.
	ListAfter func() <-chan struct{}

	// CatchUp, when set, keeps watches short until the caller's store has
	// caught up with a consistent read; see CatchUp. Nil: watches last
	// MinWatchTimeout as usual.
	CatchUp *CatchUp

	// Relister, when set, makes every list after the first — after an
	// expired or too large resourceVersion, for ListFrom, after a failed
	// catch-up — in place of a full list (package recovery's recovers what
	// changed). Nil: such lists are full lists, as client-go's.
	Relister Relister
	// PagedList, when set, takes the first list of a cold start (no
	// ResumeResourceVersion, no ListFrom) a page at a time instead of
	// Store.Replace: the list is a consistent read (resourceVersion "") in
	// pages of PageSize items (DefaultPagedListPageSize if zero), each
	// handed over as it arrives, then its resourceVersion (see PagedList).
	// If that list fails part-way, the next is an ordinary one, through
	// Store.Replace, and a consistent read if a page was handed over. Nil:
	// every list goes to Store.Replace.
	PagedList PagedList
}

// StartCause says why the reflector (re)established its view of the
// collection.
type StartCause string

const (
	// CauseCold: the first list of a reflector without ResumeResourceVersion
	// (or a retry of that list after it failed).
	CauseCold StartCause = "cold"
	// CauseResumed: the first watch, from ResumeResourceVersion, no list.
	CauseResumed StartCause = "resumed"
	// CauseRelistExpired: a list after the server answered that the
	// resourceVersion being watched is expired or too large.
	CauseRelistExpired StartCause = "relist-expired"
	// CauseRelistCatchUp: a list at "" because short watches did not bring
	// the store up to a CatchUp read (the server sends no bookmarks, or its
	// watch cache lags, or the watches fail).
	CauseRelistCatchUp StartCause = "relist-catchup"
	// CauseRelistError: any other later list: after watches failed twice in
	// a row, after Store.Resync failed (client-go relists after both),
	// ListAndWatch called again after it returned, or the first list of a
	// reflector given Options.ListFrom.
	CauseRelistError StartCause = "relist-error"
)

// Observer receives lifecycle callbacks. Calls are made synchronously from
// the goroutine running Run or ListAndWatch, never concurrently with each
// other, and must return quickly. No lock is held during a call, so an
// Observer may call LastSyncResourceVersion.
type Observer interface {
	// Resumed is called once when the first ListAndWatch starts watching
	// from ResumeResourceVersion without listing (cause CauseResumed).
	Resumed(resourceVersion string)
	// Listed is called after a successful list and Store.Replace, with the
	// number of items and of list responses (pages) that made up the
	// result.
	Listed(cause StartCause, resourceVersion string, items int, pages int)
	// WatchStarted is called for each watch request the server accepted.
	WatchStarted(resourceVersion string)
	// WatchEnded is called once per WatchStarted: nil when the watch closed
	// or timed out normally or the context was cancelled, otherwise the
	// error that ended it.
	WatchEnded(err error)
}

type nopObserver struct{}

func (nopObserver) Resumed(string)                      {}
func (nopObserver) Listed(StartCause, string, int, int) {}
func (nopObserver) WatchStarted(string)                 {}
func (nopObserver) WatchEnded(error)                    {}

// Reflector keeps a Store in step with a collection on the server by
// listing and watching it, optionally starting from a stored
// resourceVersion. See the package documentation.
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
	// delay returns the next backoff interval; client-go's backoffManager,
	// which locks internally, so it is safe from any goroutine.
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
	// Used only by the goroutine running Run or ListAndWatch:
	//
	// shortWatches counts short watches ended while catching up.
	shortWatches int
	// catchUpSettled is set by a list that settled the catch-up (see
	// catchUpListed): watches are ordinary from then on.
	catchUpSettled bool
	// watchFailures counts the watches in a row that failed to start or
	// ended with an error without delivering an event; see
	// watchFailuresBeforeRelist.
	watchFailures int
	// listInFull is set when a Relister asks for it (a relist ended
	// without its watch ever opening), and cleared when a watch opens:
	// lists are full lists meanwhile.
	listInFull bool
	// relisted is the Relister's list going on while the watch runs; nil:
	// none.
	relisted *Relisted
	// pagedListTried is set once the PagedList has been given a list.
	pagedListTried bool
	// resumedWatch is set while the watch from ResumeResourceVersion is
	// the next to be requested; listAtOnce when that watch, or one made
	// after a backoff wait, was answered with an unavailable
	// resourceVersion before any event: Run then lists without backing off
	// first (see Run).
	resumedWatch, listAtOnce bool

	// mu guards every field below. It is never held while calling the
	// Store, the ListerWatcher, the Observer or the error handler.
	mu sync.RWMutex
	// lastSyncRV is the resourceVersion of the last list or watch event
	// recorded; not synchronized with the Store (as in client-go).
	lastSyncRV string
	// lastSyncRVUnavailable is true after a list or watch at lastSyncRV
	// failed because the version is expired or too large; the next list
	// then uses "" (client-go's isLastSyncResourceVersionUnavailable).
	lastSyncRVUnavailable bool
	// resumePending is true until the first ListAndWatch has consumed
	// ResumeResourceVersion.
	resumePending bool
	// nextListCause is the StartCause reported for the next successful list.
	nextListCause StartCause
	// paginatedResult is set when a list at "0" came back paginated, which
	// means the watch cache is off; later lists then keep paging
	// (client-go's paginatedResult).
	paginatedResult bool
}

// New returns a Reflector that writes lw's collection into store. It panics
// if lw or store is nil or a numeric option is negative (API misuse).
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

// Run calls ListAndWatch until ctx is done, waiting a backoff interval
// between attempts (client-go's RunWithContext: immediate first attempt,
// sliding backoff) — except after the first watch from
// ResumeResourceVersion found that version expired (410) or too large: the
// list (or recovery) it calls for is what a cold start would make at once,
// so it follows at once; and after a watch made once a failed one's backoff
// had passed found it so: the relist has waited its backoff interval. Errors go to Options.WatchErrorHandler. Run
// returns only after every goroutine it started has exited. Run must not be called
// concurrently with itself or with ListAndWatch.
func (r *Reflector) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.V(3).Info("Starting reflector", "reflector", r.name, "type", r.typeDescription, "resyncPeriod", r.resyncPeriod)
	defer logger.V(3).Info("Stopping reflector", "reflector", r.name, "type", r.typeDescription)
	for ctx.Err() == nil {
		if err := r.ListAndWatch(ctx); err != nil {
			r.errorHandler(ctx, err)
		}
		if r.listAtOnce {
			// The start's own watch found its resourceVersion gone: this
			// process has just started and must list, as a cold start
			// does at once. Or a watch made after a backoff wait found
			// it gone: that wait was the one before the relist. The
			// backoff spreads the relists of running clients that all
			// lose their watches at one time (an apiserver restart);
			// clients that start together list together whether they
			// resume or not.
			r.listAtOnce = false
			continue
		}
		if !r.sleep(ctx) {
			return
		}
	}
}

// ListAndWatch makes one attempt: it lists (unless this is the first call
// and ResumeResourceVersion was given) and then watches until ctx is done,
// the server says the watched resourceVersion is expired or too large,
// watches failed twice in a row (see the package documentation), catching
// up calls for a list (see CatchUp), or Store.Resync fails. A single watch
// failure is retried inside, with backoff, from LastSyncResourceVersion,
// and connection refused and 429 are retried there without limit. It
// returns nil when ctx is done or a relist is due, and an error (ErrList,
// ErrStore) when the list or the store failed. It must not be called
// concurrently with itself or Run.
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
// event the reflector handed to the Store (or ResumeResourceVersion before
// anything was received). Like client-go's, it is not synchronized with the
// Store: the Store may not have applied that event yet.
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
// expired version is not marked unavailable: the relist asks for data no
// older than lastSyncRV (unpaged, so the watch cache serves it, sparing
// etcd after an apiserver restart) and falls back to a consistent read at
// "" only if that list is refused too; a too-large version, or one the
// server cannot parse, goes to "" at once.
func (r *Reflector) requestRelist(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextListCause = CauseRelistExpired
	if isTooLargeResourceVersionError(err) || isInvalidResourceVersionError(err) {
		r.lastSyncRVUnavailable = true
	}
}

// requestRelistAfterWatchFailures makes the next ListAndWatch list after
// watches failed (watchFailed), at LastSyncResourceVersion as client-go's
// relist after a watch error is.
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

// relistResourceVersionLocked mirrors client-go's relistResourceVersion:
// "" after an expired/too-large answer (consistent read), "0" for the very
// first list (served from the watch cache), lastSyncRV otherwise (data no
// older than what was already seen).
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

// sleep waits one backoff interval; false if ctx ended first. The timer is
// stopped either way, so cancellation leaves nothing behind.
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

// defaultErrorHandler logs at the levels client-go uses: its
// DefaultWatchErrorHandler, plus the V(2)/V(4) lines its watch loop writes
// for errors it retries, which this package routes through the handler.
func (r *Reflector) defaultErrorHandler(ctx context.Context, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case errors.Is(err, ErrUnexpectedObject):
		utilruntime.HandleErrorWithContext(ctx, err, "Unexpected watch event object", "reflector", r.name, "type", r.typeDescription)
	case errors.Is(err, ErrStore):
		utilruntime.HandleErrorWithContext(ctx, err, "Store rejected reflector update", "reflector", r.name, "type", r.typeDescription)
	case isExpiredError(err):
		logger.V(4).Info("Watch closed", "reflector", r.name, "type", r.typeDescription, "err", err)
	case errors.Is(err, io.EOF):
		// watch closed normally
	case errors.Is(err, io.ErrUnexpectedEOF):
		logger.V(1).Info("Watch closed with unexpected EOF", "reflector", r.name, "type", r.typeDescription, "err", err)
	case errors.Is(err, ErrWatch) && apierrors.IsTooManyRequests(err):
		logger.V(2).Info("Watch returned 429 - backing off", "reflector", r.name, "type", r.typeDescription)
	case errors.Is(err, ErrWatch) && utilnet.IsConnectionRefused(err):
		logger.V(4).Info("Watch failed - backing off", "reflector", r.name, "type", r.typeDescription, "err", err)
	case errors.Is(err, ErrWatch) && apierrors.IsInternalError(err):
		logger.V(2).Info("Retrying watch after internal error", "reflector", r.name, "type", r.typeDescription, "err", err)
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
