package reflector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
)

// A recovery replaces the full list a reflector makes when it cannot
// resume (the watched resourceVersion expired, the store owes a list) by
// one that transfers and decodes only what changed. The store already holds
// the previous state, and every stored object's UID and resourceVersion:
//
//  1. List the collection's metadata only (PartialObjectMetadataList, paged,
//     the informer's own selectors) at the last resourceVersion with
//     resourceVersionMatch=NotOlderThan (or, where that is unavailable, a
//     consistent read at ""); never at "0", which may be served by a lagging
//     watch cache behind a load balancer.
//  2. Diff (UID, resourceVersion) against the store, in order with every
//     write handed to it before (RecoveryStore.BeginRecovery). Unchanged
//     objects are left alone; objects gone, or replaced by another UID
//     under the same name, are deleted (the store delivers
//     DeletedFinalStateUnknown with the stored object); new and changed
//     objects are to be fetched. The store marks itself must-list first, so
//     a crash from here on redoes the recovery.
//  3. Watch from the metadata list's resourceVersion, and only once the
//     server has accepted that watch fetch the changed objects: a list of
//     one object (its name as a field selector, with the informer's
//     selectors) at least as new as the metadata list, on a few requests at
//     a time; a namespace where many changed is listed whole, and the whole
//     collection where most did. Watch events and fetched objects reach the
//     store as they come, through one filter that lets a key move only
//     forward: an object older than or as old as what the store was last
//     given for its key is dropped, so no handler ever sees a
//     resourceVersion go backwards; an object with another UID than the
//     key's current one is preceded by a deletion of that one.
//  4. Once every changed object has been fetched (or found gone, and its
//     deletion seen on the watch) and the watch has passed every fetched
//     resourceVersion, the store holds exactly the collection at the
//     watch's resourceVersion: the filter hands the store
//     RecoveryStore.EndRecovery with it, which records it and clears the
//     must-list mark, and steps aside.
//
// resourceVersions are compared as unsigned integers. That is valid where
// they are etcd revisions (the resources kube-apiserver serves from etcd,
// built-in and custom); a MetadataLister vouches for it. Where a metadata
// list cannot be made (the server does not serve the metadata form) or a
// resourceVersion does not parse as an integer, the reflector lists in full
// as client-go does.

// Defaults of Recovery.
const (
	// DefaultRecoveryWorkers is how many fetch requests run at once. Each
	// also goes through the client's rate limiter.
	DefaultRecoveryWorkers = 4
	// DefaultNamespaceListAt is how many changed objects of one namespace
	// (and at least FullListFraction of its objects) make the recovery list
	// the namespace rather than fetch them one by one.
	DefaultNamespaceListAt = 64
	// DefaultFullListFraction is the fraction of the collection (or of a
	// namespace) that, once changed, makes the recovery list the whole
	// collection (the namespace). Measured against kube-apiserver v1.37 on
	// loopback (e2e.TestRecoveryFetchCost): a one-object fetch costs about a
	// millisecond of wall time with four in flight (0.8 ms for realistic
	// Pods, 1–2 ms for ConfigMaps on a loaded 2-core machine), an object of
	// a full list 30 µs (a 1.4 KB ConfigMap) to 160–280 µs (a 5.8 KB Pod).
	// Fetching one by one is as fast as a full list at about a quarter of
	// the Pods changed (a few percent of small ConfigMaps), and always
	// transfers fewer bytes; so above a quarter the recovery lists.
	DefaultFullListFraction = 0.25

	// recoveryPageSize is the Limit of each metadata list page.
	recoveryPageSize = 500
	// fetchAttempts is how often one fetch request is tried before the
	// recovery gives up (and is started again after backoff).
	fetchAttempts = 3

	// A rate-limited lister's fetches are planned to take at most
	// fetchBudgetTime of its rate, or minFetchBudget requests: with
	// client-go's default of 5 requests a second, a thousand one-object
	// fetches would take over three minutes, far longer than a list.
	fetchBudgetTime = 10 * time.Second
	minFetchBudget  = 64
)

// Version is what a recovery compares of a stored object: its UID and its
// resourceVersion.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// MetadataLister is what a recovery asks the server beyond the
// ListerWatcher. Both methods list what the ListerWatcher lists — the same
// resource, namespace, label and field selectors — so that the diff and the
// fetches see exactly the collection the store holds. A MetadataLister also
// vouches that the collection's resourceVersions are etcd revisions, which
// a recovery compares as integers.
type MetadataLister interface {
	// ListMetadata lists one page of the collection's metadata, with opts'
	// ResourceVersion, ResourceVersionMatch, Limit and Continue.
	ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	// ListObjects lists the collection's objects, restricted to namespace
	// and to the object named name when they are not empty (name as a
	// metadata.name field selector, beside the lister's own selectors),
	// with opts' ResourceVersion, ResourceVersionMatch, Limit and Continue.
	ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error)
}

// RecoveryPlan is what a recovery's diff asks of the store.
type RecoveryPlan struct {
	// Deleted are the keys whose stored object is gone from the server or
	// was replaced by another UID: the store deletes them and tells its
	// handlers with a cache.DeletedFinalStateUnknown carrying the stored
	// object.
	Deleted []string
	// Unchanged are the keys whose stored object is current. The store
	// rewrites none of them; it gives them, as a relist's unchanged objects,
	// to handlers due for a resync.
	Unchanged []string
}

// RecoveryStore is a Store that can take part in a recovery. The reflector
// recovers only if Options.Recovery is set and its Store is one.
type RecoveryStore interface {
	Store
	// BeginRecovery is applied in order with every write made before it:
	// it calls diff with the Version of every stored object (by key, as
	// cache.MetaNamespaceKeyFunc makes them), marks the store as owing a
	// list (durably, before anything of the plan is applied: a crash until
	// EndRecovery must lead to another recovery), and applies the plan. It
	// returns once that is done, or with ctx's error. ErrRecoveryUnsupported
	// makes the reflector list in full instead.
	BeginRecovery(ctx context.Context, diff func(stored map[string]Version) (RecoveryPlan, error)) error
	// Stored returns the stored object at key. The reflector calls it only
	// for a key that nothing written since BeginRecovery touched.
	Stored(key string) (interface{}, bool, error)
	// EndRecovery is applied in order with every write made before it: the
	// store now holds the collection as of resourceVersion; it records that
	// version and no longer owes a list.
	EndRecovery(resourceVersion string) error
}

// Recovery configures recoveries (see Options.Recovery). Zero values are
// the defaults.
type Recovery struct {
	// Lister lists metadata and fetches objects. Required.
	Lister MetadataLister
	// Workers bounds the fetch requests in flight. Zero:
	// DefaultRecoveryWorkers.
	Workers int
	// NamespaceListAt is the number of changed objects of one namespace at
	// which, if they are also at least FullListFraction of its objects, the
	// namespace is listed whole instead. Zero: DefaultNamespaceListAt;
	// negative: never.
	NamespaceListAt int
	// FullListFraction is the fraction of the collection changed at which
	// the whole collection is listed instead. Zero:
	// DefaultFullListFraction; above 1: never.
	FullListFraction float64
	// MaxFetchRequests bounds the fetch requests of one recovery: above
	// it, the namespaces with the most changes are listed instead, and the
	// whole collection if that is not enough. Zero: if the Lister is a
	// RateLimitedLister, what its rate allows in 10 seconds (at least 64);
	// otherwise no bound. Negative: no bound.
	MaxFetchRequests int
}

// RateLimitedLister is a MetadataLister whose requests go through a client
// rate limiter (client-go's default is 5 a second); a recovery plans its
// fetches to fit it (see Recovery.MaxFetchRequests).
type RateLimitedLister interface {
	MetadataLister
	// QPS is the sustained rate of requests the limiter allows; zero or
	// less for none.
	QPS() float32
}

// RecoveryStats describes one recovery.
type RecoveryStats struct {
	// Listed is the number of items of the metadata list, Pages its pages.
	Listed, Pages int
	// Unchanged, Deleted and Fetch classify the stored and listed keys:
	// unchanged; gone or replaced by another UID; new, changed or replaced.
	// Ahead are stored objects newer than the list (left by an earlier
	// recovery that did not finish).
	Unchanged, Deleted, Fetch, Ahead int
	// Requests is the number of fetch requests (one object, a namespace, or
	// the whole collection); Fetched the objects they returned that were
	// applied; Skipped the fetched objects and watch events dropped because
	// the store already held their key at that resourceVersion or a newer
	// one.
	Requests, Fetched, Skipped int
	// Duration is the time from the metadata list to the store's
	// consistency.
	Duration time.Duration
}

// RecoveryObserver is an Observer that also hears of recoveries. A
// recovery's metadata list is reported through Listed (items and pages of
// the metadata list) once the store has applied its diff.
type RecoveryObserver interface {
	Observer
	// Recovered is called once a recovery has made the store consistent at
	// resourceVersion. It may be called from a goroutine of the recovery,
	// concurrently with the other callbacks.
	Recovered(cause StartCause, resourceVersion string, stats RecoveryStats)
}

// errRecoveryFallback: the recovery cannot be made; list in full.
var errRecoveryFallback = errors.New("recovery not possible")

// setUpRecovery makes the reflector recover instead of relisting, if cfg
// asks for it and the store can.
func (r *Reflector) setUpRecovery(cfg *Recovery) {
	if cfg == nil || cfg.Lister == nil {
		return
	}
	rs, ok := r.store.(RecoveryStore)
	if !ok {
		return
	}
	c := *cfg // Options are frozen at New
	if c.Workers <= 0 {
		c.Workers = DefaultRecoveryWorkers
	}
	if c.NamespaceListAt == 0 {
		c.NamespaceListAt = DefaultNamespaceListAt
	}
	if c.FullListFraction == 0 {
		c.FullListFraction = DefaultFullListFraction
	}
	r.recovery = &c
	r.filter = &recoveryFilter{next: rs, r: r}
	r.store = r.filter
	r.lw = recoveryWatches{ListerWatcherWithContext: r.lw, f: r.filter}
}

// listOrRecover makes the list ListAndWatch is due: a recovery where one
// is set up and the reflector has seen a resourceVersion, a full list
// otherwise or where the recovery cannot be made. It returns the context
// the watch must run under (a recovery cancels it if its fetches fail) and
// finish, which ListAndWatch calls on its way out: it stops the recovery's
// fetches, waits for them, and returns the error that made them fail.
func (r *Reflector) listOrRecover(ctx context.Context) (context.Context, func() error, error) {
	none := func() error { return nil }
	if r.recovery == nil || r.relistResourceVersion() == "0" || r.listInFull {
		return ctx, none, r.list(ctx)
	}
	rec, err := r.recover(ctx)
	switch {
	case errors.Is(err, errRecoveryFallback):
		return ctx, none, r.list(ctx)
	case err != nil || rec == nil:
		return ctx, none, err
	}
	return rec.ctx, rec.finish, nil
}

// recover lists the collection's metadata, has the store apply the diff and
// starts fetching what changed once the watch is open. It returns nil, nil
// if ctx ended, and errRecoveryFallback if the reflector must list in full.
func (r *Reflector) recover(ctx context.Context) (*recovery, error) {
	if r.listAfter != nil {
		select {
		case <-r.listAfter:
		case <-ctx.Done():
			return nil, nil
		}
	}
	logger := klog.FromContext(ctx)
	r.mu.RLock()
	cause := r.nextListCause
	from := r.relistResourceVersionLocked()
	r.mu.RUnlock()
	start := r.clock.Now()

	listedAt := from
	listed, listRV, pages, err := r.listMetadata(ctx, from)
	if isResourceVersionUnavailable(err) {
		r.markResourceVersionUnavailable(cause)
		listedAt = r.relistResourceVersion()
		listed, listRV, pages, err = r.listMetadata(ctx, listedAt)
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	if err != nil {
		if metadataListUnsupported(err) {
			logger.V(2).Info("The server cannot list this collection's metadata; listing it in full", "reflector", r.name, "type", r.typeDescription, "err", err)
			return nil, errRecoveryFallback
		}
		return nil, fmt.Errorf("%w: %s: metadata list: %w", ErrList, r.typeDescription, err)
	}
	rec := newRecovery(r, cause, start)
	if !rec.setList(listRV, listed) {
		logger.V(2).Info("resourceVersions are not integers; listing in full", "reflector", r.name, "type", r.typeDescription, "resourceVersion", listRV)
		return nil, errRecoveryFallback
	}
	rec.stats.Listed, rec.stats.Pages = len(listed), pages
	err = r.filter.next.BeginRecovery(ctx, rec.diff)
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, ErrRecoveryUnsupported):
		return nil, errRecoveryFallback
	case err != nil:
		return nil, fmt.Errorf("%w: beginning a recovery at resourceVersion %q: %w", ErrStore, listRV, err)
	}

	if r.catchingUp() {
		// A read made after the start, as a list's (see catchUpListed); the
		// store does not count as caught up before the recovery ends.
		r.catchUpListed(listedAt, listRV)
	}
	r.mu.Lock()
	r.lastSyncRVUnavailable = false
	r.lastSyncRV = listRV
	r.nextListCause = CauseRelistError
	r.mu.Unlock()
	r.watchFailures = 0 // watches failing in a row since this list
	logger.V(2).Info("Recovering", "reflector", r.name, "type", r.typeDescription, "cause", cause,
		"resourceVersion", listRV, "listed", len(listed), "unchanged", rec.stats.Unchanged,
		"deleted", rec.stats.Deleted, "fetch", rec.stats.Fetch, "ahead", rec.stats.Ahead)
	r.observer.Listed(cause, listRV, len(listed), pages)
	rec.start(ctx)
	return rec, nil
}

// metadataListUnsupported reports whether err says the server cannot serve
// the metadata list at all (as opposed to failing this time).
func metadataListUnsupported(err error) bool {
	return apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err)
}

// listMetadata lists the collection's metadata, paged, at resourceVersion
// with NotOlderThan (or a consistent read at ""). It returns every item's
// Version by key, the list's resourceVersion and the number of pages.
func (r *Reflector) listMetadata(ctx context.Context, resourceVersion string) (map[string]listedItem, string, int, error) {
	opts := metav1.ListOptions{ResourceVersion: resourceVersion, Limit: recoveryPageSize}
	if resourceVersion != "" {
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	first := opts
	out := map[string]listedItem{}
	listRV, pages := "", 0
	for {
		page, err := r.recovery.Lister.ListMetadata(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			// As the pager does: the continue token expired, list in one go.
			opts = first
			opts.Limit = 0
			out, pages = map[string]listedItem{}, 0
			page, err = r.recovery.Lister.ListMetadata(ctx, opts)
		}
		if err != nil {
			return nil, "", 0, err
		}
		if page == nil {
			return nil, "", 0, errors.New("metadata list returned no list")
		}
		pages++
		if listRV == "" || opts.Continue == "" {
			listRV = page.ResourceVersion
		}
		for i := range page.Items {
			m := &page.Items[i].ObjectMeta
			key := m.Name
			if m.Namespace != "" {
				key = m.Namespace + "/" + m.Name
			}
			out[key] = listedItem{uid: m.UID, rv: m.ResourceVersion}
		}
		if page.Continue == "" || opts.Limit == 0 {
			return out, listRV, pages, nil
		}
		opts.Continue = page.Continue
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// listedItem is one item of the metadata list.
type listedItem struct {
	uid types.UID
	rv  string
	n   uint64 // rv as an integer
}

// keyState is what a recovery knows of a key's state in the store: the
// last state it handed the store (or the stored one).
type keyState struct {
	uid  types.UID
	rv   uint64
	gone bool // not in the store
	// obj is the object last handed to the store; nil: the stored one.
	obj interface{}
}

// recovery is one recovery; see the comment at the top of the file.
//
// Goroutines: the reflector's (ListAndWatch, then the watch loop, whose
// events reach the store through recoveryFilter) and one fetch goroutine,
// started by start and joined by finish, which runs the fetch requests on
// up to Recovery.Workers goroutines of its own and joins them.
type recovery struct {
	r     *Reflector
	cause StartCause
	began time.Time
	// ctx is the watch's context; cancel ends it (a failed fetch) and the
	// fetches with it.
	ctx    context.Context
	cancel context.CancelFunc
	// opened is closed when the first watch is accepted; fetching waits
	// for it.
	opened     chan struct{}
	openedOnce sync.Once
	fetching   sync.WaitGroup

	listRV   string
	listN    uint64
	listed   map[string]listedItem
	fetchNS  map[string][]string // keys to fetch, by namespace; set by diff
	listedNS map[string]int      // listed objects by namespace; set by diff

	// mu guards the fields below, and is held while they are handed to the
	// store: the store sees writes in the order they pass the filter.
	mu sync.Mutex
	// keys holds the keys the forward rule must know: those whose stored
	// state is not the listed one, and every key written since.
	keys map[string]*keyState
	// pending are the keys still to be fetched; awaitWatch those found gone
	// by a fetch, resolved by the watch event that deletes them.
	pending, awaitWatch map[string]struct{}
	// watchN and watchRV are the watch's position (its latest event or
	// bookmark, or the list's resourceVersion); mark is the
	// resourceVersion it must pass for the store to be consistent.
	watchN  uint64
	watchRV string
	mark    uint64
	done    bool
	err     error // why the fetches failed
	stats   RecoveryStats
}

func newRecovery(r *Reflector, cause StartCause, start time.Time) *recovery {
	return &recovery{
		r: r, cause: cause, began: start,
		opened:     make(chan struct{}),
		keys:       map[string]*keyState{},
		pending:    map[string]struct{}{},
		awaitWatch: map[string]struct{}{},
		fetchNS:    map[string][]string{},
		listedNS:   map[string]int{},
	}
}

// parseRV reads a resourceVersion as an etcd revision.
func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// setList records the metadata list; false if a resourceVersion is not an
// integer.
func (rec *recovery) setList(listRV string, listed map[string]listedItem) bool {
	n, ok := parseRV(listRV)
	if !ok {
		return false
	}
	for key, it := range listed {
		if it.n, ok = parseRV(it.rv); !ok {
			return false
		}
		listed[key] = it
	}
	rec.listRV, rec.listN, rec.listed = listRV, n, listed
	rec.watchN, rec.watchRV = n, listRV
	return true
}

// diff compares the listed items with the stored Versions; the store calls
// it in order with its writes (RecoveryStore.BeginRecovery).
func (rec *recovery) diff(stored map[string]Version) (RecoveryPlan, error) {
	var plan RecoveryPlan
	fetch := func(key string) {
		rec.pending[key] = struct{}{}
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		rec.fetchNS[ns] = append(rec.fetchNS[ns], key)
	}
	for key, l := range rec.listed {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		rec.listedNS[ns]++
		s, had := stored[key]
		sn, parsed := parseRV(s.ResourceVersion)
		sameUID := s.UID == "" || l.uid == "" || s.UID == l.uid
		switch {
		case !had:
			rec.keys[key] = &keyState{gone: true}
			fetch(key)
		case parsed && sn > l.n:
			// Newer than the list: an earlier recovery fetched it and did
			// not finish. The watch will pass it.
			rec.keys[key] = &keyState{uid: s.UID, rv: sn}
			rec.mark = max(rec.mark, sn)
			rec.stats.Ahead++
		case parsed && sn == l.n && sameUID:
			plan.Unchanged = append(plan.Unchanged, key)
		case !sameUID:
			plan.Deleted = append(plan.Deleted, key)
			rec.keys[key] = &keyState{gone: true}
			fetch(key)
		default:
			rec.keys[key] = &keyState{uid: s.UID, rv: sn}
			fetch(key)
		}
	}
	for key := range stored {
		if _, ok := rec.listed[key]; !ok {
			plan.Deleted = append(plan.Deleted, key)
		}
	}
	slices.Sort(plan.Deleted)
	slices.Sort(plan.Unchanged)
	for ns := range rec.fetchNS {
		slices.Sort(rec.fetchNS[ns])
	}
	rec.stats.Unchanged, rec.stats.Deleted, rec.stats.Fetch = len(plan.Unchanged), len(plan.Deleted), len(rec.pending)
	rec.listed = nil // not needed any more
	return plan, nil
}

// start puts the recovery in the store's way (recoveryFilter) and starts
// fetching, which waits for the watch to open.
func (rec *recovery) start(ctx context.Context) {
	rec.ctx, rec.cancel = context.WithCancel(ctx)
	f := rec.r.filter
	f.activate(rec)
	f.lock()
	rec.checkDoneLocked()
	nothing := len(rec.pending) == 0
	f.unlock(rec)
	if nothing {
		return
	}
	rec.fetching.Go(func() { rec.r.fetchChanged(rec) })
}

// finish stops the fetches, waits for them, takes the recovery out of the
// store's way if it did not complete, and returns why the fetches failed.
func (rec *recovery) finish() error {
	outer := context.Cause(rec.ctx) // before cancel: was it ended from outside?
	rec.cancel()
	rec.fetching.Wait()
	rec.r.filter.deactivate(rec)
	select {
	case <-rec.opened:
	default:
		if outer == nil || rec.err != nil {
			// The watch never opened (refused, failing): without it no
			// recovery can end. List in full until a watch opens, as
			// client-go lists while its watches fail.
			rec.r.listInFull = true
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.err
}

// fail records err and ends the watch, so that ListAndWatch returns it and
// Run starts over after backoff.
func (rec *recovery) fail(err error) {
	rec.mu.Lock()
	if rec.err == nil && !rec.done {
		rec.err = err
	}
	rec.mu.Unlock()
	rec.cancel()
}

// watchOpened is called whenever a watch was accepted.
func (rec *recovery) watchOpened() { rec.openedOnce.Do(func() { close(rec.opened) }) }

// writeLocked hands obj to the store as the key's new state, applying the
// forward rule; it reports whether it did. fromWatch: a watch event.
func (rec *recovery) writeLocked(key string, t watch.EventType, obj interface{}, fromWatch bool) (bool, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, rec.r.filter.next.Add(obj) // let the store report it
	}
	n, ok := parseRV(m.GetResourceVersion())
	st := rec.keys[key]
	if fromWatch {
		delete(rec.awaitWatch, key)
		delete(rec.pending, key) // the event is newer than the list
	}
	next := rec.r.filter.next
	if !ok {
		// Not an integer: nothing to compare. Pass it on as it is.
		switch t {
		case watch.Added:
			return true, next.Add(obj)
		case watch.Deleted:
			return true, next.Delete(obj)
		}
		return true, next.Update(obj)
	}
	if st != nil && n <= st.rv {
		rec.stats.Skipped++
		return false, nil
	}
	if t == watch.Deleted {
		rec.keys[key] = &keyState{rv: n, gone: true}
		if st != nil && st.gone {
			// The store does not hold it: its handlers never saw it.
			return true, nil
		}
		return true, next.Delete(obj)
	}
	rec.keys[key] = &keyState{uid: m.GetUID(), rv: n, obj: obj}
	switch {
	case st == nil:
		if t == watch.Added {
			return true, next.Add(obj)
		}
		return true, next.Update(obj)
	case st.gone:
		return true, next.Add(obj)
	case st.uid != "" && m.GetUID() != "" && st.uid != m.GetUID():
		// Another object under the same name: the old one is gone.
		old := st.obj
		if old == nil {
			var exists bool
			if old, exists, err = rec.r.filter.next.Stored(key); err != nil || !exists {
				old = nil
			}
		}
		if err := next.Delete(cache.DeletedFinalStateUnknown{Key: key, Obj: old}); err != nil {
			return true, err
		}
		return true, next.Add(obj)
	}
	return true, next.Update(obj)
}

// watchedLocked advances the watch's position.
func (rec *recovery) watchedLocked(rv string) {
	if n, ok := parseRV(rv); ok && n > rec.watchN {
		rec.watchN, rec.watchRV = n, rv
	}
}

// fetchedLocked applies the result of fetching key: obj, or nil if the
// server no longer has it (in the informer's selection).
func (rec *recovery) fetchedLocked(key string, obj runtime.Object) error {
	if rec.done {
		return nil
	}
	if _, ok := rec.pending[key]; !ok {
		return nil // a watch event came first; it is newer than the list
	}
	delete(rec.pending, key)
	var err error
	if obj == nil {
		// Deleted (or out of the selection) after the list: the watch
		// delivers that deletion (an event for the key would have resolved
		// it already).
		rec.awaitWatch[key] = struct{}{}
	} else {
		var wrote bool
		if wrote, err = rec.writeLocked(key, watch.Modified, obj, false); wrote {
			rec.stats.Fetched++
		}
		if m, aerr := meta.Accessor(obj); aerr == nil {
			if n, ok := parseRV(m.GetResourceVersion()); ok {
				rec.mark = max(rec.mark, n)
			}
		}
	}
	rec.checkDoneLocked()
	return err
}

// checkDoneLocked ends the recovery once the store is consistent: nothing
// left to fetch, every deletion a fetch found seen on the watch, and the
// watch past every fetched resourceVersion.
func (rec *recovery) checkDoneLocked() {
	if rec.done || len(rec.pending) > 0 || len(rec.awaitWatch) > 0 || rec.watchN < rec.mark {
		return
	}
	rec.done = true
	r := rec.r
	r.filter.deactivateLocked(rec)
	if err := r.filter.next.EndRecovery(rec.watchRV); err != nil {
		r.errorHandler(rec.ctx, fmt.Errorf("%w: ending a recovery at resourceVersion %q: %w", ErrStore, rec.watchRV, err))
	}
	rec.stats.Duration = r.clock.Since(rec.began)
	klog.FromContext(rec.ctx).V(2).Info("Recovered", "reflector", r.name, "type", r.typeDescription,
		"resourceVersion", rec.watchRV, "requests", rec.stats.Requests, "fetched", rec.stats.Fetched,
		"skipped", rec.stats.Skipped, "duration", rec.stats.Duration)
	if o, ok := r.observer.(RecoveryObserver); ok {
		o.Recovered(rec.cause, rec.watchRV, rec.stats)
	}
}

// recoveryFilter is the reflector's Store while recoveries are set up: it
// passes every write through, except that during a recovery watch events
// go through the recovery's forward rule.
type recoveryFilter struct {
	next RecoveryStore
	r    *Reflector

	// mu guards rec and is held while a write passes: recovery writes and
	// watch events reach next in the order they took it.
	mu  sync.Mutex
	rec *recovery // nil: no recovery under way
}

var _ Store = (*recoveryFilter)(nil)

func (f *recoveryFilter) activate(rec *recovery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rec = rec
}

// deactivate takes rec out of the way if it still is.
func (f *recoveryFilter) deactivate(rec *recovery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deactivateLocked(rec)
}

func (f *recoveryFilter) deactivateLocked(rec *recovery) {
	if f.rec == rec {
		f.rec = nil
	}
}

// lock takes f.mu and, if a recovery is under way, its mu; unlock releases
// them. Lock order: f.mu, then recovery.mu.
func (f *recoveryFilter) lock() *recovery {
	f.mu.Lock()
	rec := f.rec
	if rec != nil {
		rec.mu.Lock()
	}
	return rec
}

func (f *recoveryFilter) unlock(rec *recovery) {
	if rec != nil {
		rec.mu.Unlock()
	}
	f.mu.Unlock()
}

func (f *recoveryFilter) event(t watch.EventType, obj interface{}) error {
	rec := f.lock()
	defer f.unlock(rec)
	if rec == nil {
		switch t {
		case watch.Added:
			return f.next.Add(obj)
		case watch.Deleted:
			return f.next.Delete(obj)
		}
		return f.next.Update(obj)
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return f.next.Add(obj) // the store reports it
	}
	_, err = rec.writeLocked(key, t, obj, true)
	if m, aerr := meta.Accessor(obj); aerr == nil {
		rec.watchedLocked(m.GetResourceVersion())
	}
	rec.checkDoneLocked()
	return err
}

// Add implements Store.
func (f *recoveryFilter) Add(obj interface{}) error { return f.event(watch.Added, obj) }

// Update implements Store.
func (f *recoveryFilter) Update(obj interface{}) error { return f.event(watch.Modified, obj) }

// Delete implements Store.
func (f *recoveryFilter) Delete(obj interface{}) error { return f.event(watch.Deleted, obj) }

// Bookmark implements Store.
func (f *recoveryFilter) Bookmark(resourceVersion string) error {
	rec := f.lock()
	defer f.unlock(rec)
	err := f.next.Bookmark(resourceVersion)
	if rec != nil {
		rec.watchedLocked(resourceVersion)
		rec.checkDoneLocked()
	}
	return err
}

// Replace implements Store.
func (f *recoveryFilter) Replace(list []interface{}, resourceVersion string) error {
	return f.next.Replace(list, resourceVersion)
}

// Resync implements Store.
func (f *recoveryFilter) Resync() error { return f.next.Resync() }

// watchOpened tells a recovery under way that a watch was accepted.
func (f *recoveryFilter) watchOpened() {
	f.mu.Lock()
	rec := f.rec
	f.mu.Unlock()
	if rec != nil {
		rec.watchOpened()
	}
}

// recoveryWatches tells the filter when a watch was accepted.
type recoveryWatches struct {
	cache.ListerWatcherWithContext
	f *recoveryFilter
}

func (l recoveryWatches) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ListerWatcherWithContext.WatchWithContext(ctx, opts)
	if err == nil && w != nil {
		l.f.r.listInFull = false // called on the reflector's goroutine
		l.f.watchOpened()
	}
	return w, err
}

// fetchChanged fetches the keys a recovery found new or changed, once the
// watch is open: the whole collection if most of it changed, namespaces
// where many changed, and one object per request otherwise, up to
// Recovery.Workers requests at a time. A request that fails fetchAttempts
// times fails the recovery.
func (r *Reflector) fetchChanged(rec *recovery) {
	ctx := rec.ctx
	select {
	case <-rec.opened:
	case <-ctx.Done():
		return
	}
	cfg := r.recovery
	total := rec.stats.Unchanged + rec.stats.Fetch + rec.stats.Ahead
	full, lists, singles := planFetches(cfg, r.maxFetchRequests(), rec.fetchNS, rec.listedNS, rec.stats.Fetch, total)
	if full {
		if err := r.fetchList(rec, ""); err != nil {
			rec.fail(err)
		}
		return
	}
	work := make(chan func() error)
	var workers sync.WaitGroup
	for range min(cfg.Workers, len(lists)+len(singles)) {
		workers.Go(func() {
			for fn := range work {
				if err := fn(); err != nil {
					rec.fail(err)
				}
			}
		})
	}
feed:
	for _, ns := range lists {
		select {
		case work <- func() error { return r.fetchList(rec, ns) }:
		case <-ctx.Done():
			break feed
		}
	}
	for _, key := range singles {
		if ctx.Err() != nil {
			break
		}
		if !rec.stillPending(key) {
			continue
		}
		select {
		case work <- func() error { return r.fetchOne(rec, key) }:
		case <-ctx.Done():
		}
	}
	close(work)
	workers.Wait()
}

// planFetches decides how to fetch the keys of fetchNS (by namespace; fetch
// in all, of total listed objects, listedNS by namespace): the whole
// collection (full) once FullListFraction of it changed; otherwise the
// namespaces where NamespaceListAt and FullListFraction of their objects
// changed (lists), and the rest one by one (singles). With a request
// budget (maxRequests > 0), namespaces with the most changes are listed
// instead until the requests fit, and the whole collection if they still
// do not.
func planFetches(cfg *Recovery, maxRequests int, fetchNS map[string][]string, listedNS map[string]int, fetch, total int) (full bool, lists, singles []string) {
	if float64(fetch) >= cfg.FullListFraction*float64(total) {
		return true, nil, nil
	}
	var rest []string // namespaces fetched one by one
	for ns, keys := range fetchNS {
		if ns != "" && cfg.NamespaceListAt > 0 && len(keys) >= cfg.NamespaceListAt &&
			float64(len(keys)) >= cfg.FullListFraction*float64(listedNS[ns]) {
			lists = append(lists, ns)
		} else {
			rest = append(rest, ns)
		}
	}
	n := 0
	for _, ns := range rest {
		n += len(fetchNS[ns])
	}
	if maxRequests > 0 && len(lists)+n > maxRequests {
		// Most changes first; ties by name, for a stable plan.
		slices.SortFunc(rest, func(a, b string) int {
			if d := len(fetchNS[b]) - len(fetchNS[a]); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		for len(rest) > 0 && rest[0] != "" && len(lists)+n > maxRequests {
			n -= len(fetchNS[rest[0]])
			lists = append(lists, rest[0])
			rest = rest[1:]
		}
		if len(lists)+n > maxRequests {
			return true, nil, nil
		}
	}
	for _, ns := range rest {
		singles = append(singles, fetchNS[ns]...)
	}
	slices.Sort(lists)
	slices.Sort(singles)
	return false, lists, singles
}

// maxFetchRequests is Recovery.MaxFetchRequests, or derived from the
// lister's rate limit: at least minFetchBudget requests, and no more than
// the limit allows in fetchBudgetTime; 0 for no limit.
func (r *Reflector) maxFetchRequests() int {
	if n := r.recovery.MaxFetchRequests; n != 0 {
		return max(n, 0)
	}
	rl, ok := r.recovery.Lister.(RateLimitedLister)
	if !ok {
		return 0
	}
	qps := rl.QPS()
	if qps <= 0 {
		return 0
	}
	return max(minFetchBudget, int(float64(qps)*fetchBudgetTime.Seconds()))
}

// stillPending reports whether key is still to be fetched.
func (rec *recovery) stillPending(key string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	_, ok := rec.pending[key]
	return ok && !rec.done
}

// fetchOptions asks for data at least as new as the metadata list.
func (rec *recovery) fetchOptions() metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: rec.listRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
}

// fetchOne fetches one changed object.
func (r *Reflector) fetchOne(rec *recovery, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("%w: %s: key %q: %w", ErrList, r.typeDescription, key, err)
	}
	var list runtime.Object
	err = r.retryFetch(rec, func() (err error) {
		list, err = r.recovery.Lister.ListObjects(rec.ctx, ns, name, rec.fetchOptions())
		return err
	})
	if err != nil || rec.ctx.Err() != nil {
		return err
	}
	items, err := r.fetchedItems(list)
	if err != nil {
		return err
	}
	var found runtime.Object
	for _, it := range items {
		if k, _ := cache.MetaNamespaceKeyFunc(it); k == key {
			found = it
		}
	}
	return r.applyFetched(rec, []string{key}, map[string]runtime.Object{key: found})
}

// fetchList lists namespace ("" the whole collection) and applies what it
// returns for the keys still to be fetched there.
func (r *Reflector) fetchList(rec *recovery, namespace string) error {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.recovery.Lister.ListObjects(ctx, namespace, "", opts)
	})
	var list runtime.Object
	err := r.retryFetch(rec, func() (err error) {
		list, _, err = p.ListWithAlloc(rec.ctx, rec.fetchOptions())
		return err
	})
	if err != nil || rec.ctx.Err() != nil {
		return err
	}
	items, err := r.fetchedItems(list)
	if err != nil {
		return err
	}
	found := make(map[string]runtime.Object, len(items))
	for _, it := range items {
		if k, err := cache.MetaNamespaceKeyFunc(it); err == nil {
			found[k] = it
		}
	}
	var keys []string
	if namespace == "" {
		for _, ks := range rec.fetchNS {
			keys = append(keys, ks...)
		}
		slices.Sort(keys)
	} else {
		keys = rec.fetchNS[namespace]
	}
	return r.applyFetched(rec, keys, found)
}

// retryFetch runs one fetch request, trying fetchAttempts times with
// backoff, and counts it.
func (r *Reflector) retryFetch(rec *recovery, fn func() error) error {
	var err error
	for attempt := range fetchAttempts {
		if attempt > 0 && !r.sleep(rec.ctx) {
			return nil
		}
		rec.mu.Lock()
		rec.stats.Requests++
		rec.mu.Unlock()
		if err = fn(); err == nil || rec.ctx.Err() != nil {
			return nil
		}
		r.errorHandler(rec.ctx, fmt.Errorf("%w: %s: fetching changed objects (attempt %d of %d): %w", ErrList, r.typeDescription, attempt+1, fetchAttempts, err))
	}
	return fmt.Errorf("%w: %s: fetching changed objects: %w", ErrList, r.typeDescription, err)
}

// fetchedItems extracts a fetch's items, checking each as a watch event's
// object is checked.
func (r *Reflector) fetchedItems(list runtime.Object) ([]runtime.Object, error) {
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: unable to extract items of %T: %w", ErrList, r.typeDescription, list, err)
	}
	out := items[:0]
	for _, it := range items {
		if err := r.checkObject(it); err != nil {
			r.errorHandler(context.Background(), err)
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// applyFetched applies, for each of keys, what a fetch found (absent from
// found: gone).
func (r *Reflector) applyFetched(rec *recovery, keys []string, found map[string]runtime.Object) error {
	f := r.filter
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rec != rec {
		return nil // over: completed, or stopped
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, key := range keys {
		if err := rec.fetchedLocked(key, found[key]); err != nil {
			r.errorHandler(rec.ctx, fmt.Errorf("%w: fetched %s: %w", ErrStore, key, err))
		}
	}
	return nil
}
