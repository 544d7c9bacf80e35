package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/reflector"
)

// defaultWorkers is Recovery.Workers' default: four requests at a time,
// each through the client's rate limiter.
const defaultWorkers = 4

// The tuning of a recovery: what the measurements chose. Tuning overrides
// the first two; the rest are fixed.
const (
	// fullListFraction changed lists the collection: e2e.TestRecoveryFetchCost, one-object fetches match a decoded list at a quarter.
	fullListFraction = 0.25
	// firstPageFraction changed on a metadata list's first page lists in full: informerbench recover at 100,000 Pods, the full list wins from 4%.
	firstPageFraction = 0.05

	// recoveryPageSize is a metadata page's Limit, as client-go's pager's.
	recoveryPageSize = 500
	// recoveryStreamPageSize is a streamed metadata page's Limit: about 44 MB of realistic Pods' metadata, 20 requests for 100,000.
	recoveryStreamPageSize = 10000
	// fetchAttempts is how often one fetch request is tried before the
	// recovery gives up (and is started again after backoff).
	fetchAttempts = 3
	// fetchBudgetTime of a rate-limited lister's rate bounds the fetches: at client-go's 5 QPS, 1,000 fetches would outlast a list.
	fetchBudgetTime = 10 * time.Second
	// minFetchBudget is the least request budget a rate limit leaves.
	minFetchBudget = 64
)

// Version is what a recovery compares of a stored object: its UID and its
// resourceVersion.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// Lister is what a recovery asks the server beyond the ListerWatcher, as
// functions, as client-go's cache.ListWatch is. Its lists are exactly the
// ListerWatcher's: the same resource, namespace, label and field
// selectors. So the diff and the fetches see the collection the store
// holds. A Lister vouches that the collection's resourceVersions are etcd
// revisions, which a recovery compares as integers, unless
// Recovery.OpaqueVersions says otherwise. ListMetadata and ListObjects are
// required; each other field's comment names what its zero value does.
// New copies the Lister, so a change made to it later changes no recovery.
type Lister struct {
	// ListMetadata lists one page of the collection's metadata, with opts'
	// ResourceVersion, ResourceVersionMatch, Limit and Continue. Required.
	ListMetadata func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	// ListObjects lists the collection's objects, restricted to namespace
	// and to the object named name when they are not empty (name as a
	// metadata.name field selector, beside the lister's own selectors),
	// with opts' ResourceVersion, ResourceVersionMatch, Limit and Continue.
	// Required.
	ListObjects func(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error)
	// ListMetadataWire is ListMetadata, undecoded, its request made with
	// the Accept header MetadataListAccept: it returns the response body,
	// which the caller reads and closes. A recovery then reads each item's
	// identity from a Kubernetes protobuf body as it arrives (a JSON body
	// is decoded). It asks for larger pages (recoveryStreamPageSize), as it
	// holds one item at a time. Nil: pages of 500 items, each decoded by
	// ListMetadata.
	ListMetadataWire func(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error)
	// ListObjectsWire is ListObjects of namespace (empty: all the lister
	// lists) without a name, undecoded. It returns the response body as it
	// arrives, which the caller reads and closes, and a function that
	// decodes a whole body as ListObjects would have.
	//
	// A recovery that cannot list metadata (the server does not serve the
	// metadata form, as an aggregated API may not) or compare the listed
	// resourceVersions (they are not integers) lists the whole collection
	// through it instead. It reads each item's UID and resourceVersion from
	// the bytes of a Kubernetes protobuf response and decodes only the
	// items that changed. Its fetch of the whole collection likewise
	// decodes only the objects it is for. A body in another format (JSON)
	// is decoded whole.
	//
	// Nil: those lists are decoded whole (ListObjects), and a recovery
	// whose metadata list cannot be made or compared is a full list through
	// Store.Replace, as client-go's, unless Recovery.ListInFull is set.
	ListObjectsWire func(ctx context.Context, namespace string, opts metav1.ListOptions) (body io.ReadCloser, decode func([]byte) (runtime.Object, error), err error)
	// QPS is the sustained rate of the client rate limiter that the
	// requests go through (client-go's default is 5 a second). A recovery
	// plans its fetches to fit it (see fetchBudgetTime). Zero or less: no
	// limit, and no request budget.
	QPS float32
}

// MetadataListAccept is the Accept header of Lister.ListMetadataWire's
// request: the list's metadata only, in protobuf or JSON, as client-go's
// metadata client asks, but never the objects (client-go's also accepts
// plain JSON): a server that cannot serve the metadata form answers 406
// Not Acceptable, and the recovery lists in full instead.
const MetadataListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

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

// RecoveryStore is the reflector's Store as a recovery needs it (New).
// reflector.Options.ListAfter does not hold a recovery back. Unlike a
// Replace, a recovery's diff and writes are each about a few keys. The
// store orders them after whatever it owes those keys, such as a warm
// start's delivery of their stored state.
type RecoveryStore interface {
	reflector.Store
	// BeginRecovery is applied in order with every write made before it:
	// it calls diff with the Version of every stored object (by key, as
	// cache.MetaNamespaceKeyFunc makes them), marks the store as owing a
	// list (durably, before anything of the plan is applied: a crash until
	// EndRecovery must lead to another recovery), and applies the plan. It
	// returns once that is done, or with ctx's error. ErrRecoveryUnsupported
	// makes the reflector list in full instead (reflector.ErrFullList).
	BeginRecovery(ctx context.Context, diff func(stored map[string]Version) (RecoveryPlan, error)) error
	// Stored returns the stored object at key. A recovery calls it only
	// for a key that nothing written since BeginRecovery touched.
	Stored(key string) (interface{}, bool, error)
	// EndRecovery is applied in order with every write made before it: the
	// store now holds the collection as of resourceVersion; it records that
	// version and no longer owes a list.
	EndRecovery(resourceVersion string) error
}

// Recovery is what a user chooses of recoveries (cache.InformerOptions
// and the factories take it). Zero values are the defaults.
type Recovery struct {
	// Lister lists metadata and fetches objects. Required: Validate
	// names what is missing.
	Lister *Lister
	// Workers bounds the fetch requests in flight. Zero: 4.
	Workers int
	// ListInFull makes every recovery list the whole collection through
	// the Lister instead of its metadata and then what changed: where the
	// informer's objects are metadata (PartialObjectMetadata), its full
	// list is no larger than the metadata list and holds the changed
	// objects. Through Lister.ListObjectsWire only the changed items are
	// decoded; otherwise the pages are decoded whole (ListObjects), and only the
	// writing and delivering of the unchanged objects is saved.
	ListInFull bool
	// OpaqueVersions says the Lister does not vouch that the collection's
	// resourceVersions are etcd revisions (a Lister does by default): an
	// aggregated API's server may serve any string. A recovery then tells
	// two resourceVersions only equal or not — an object listed at the
	// stored UID and resourceVersion is unchanged, any other is applied as
	// listed — and lists in full (as for resourceVersions that are not
	// integers): OpaqueVersions implies ListInFull, since without ordered
	// versions an object fetched after the list could not be told from an
	// older state the watch brings.
	OpaqueVersions bool
	// Tuning overrides the measured choices of how a recovery lists and
	// fetches. The zero Tuning keeps them all.
	Tuning Tuning
}

// Tuning overrides a recovery's measured choices. Each zero field keeps
// the default its comment names, and with it the measurement that set it.
// It is for benchmarks and tests that need one path; a wrong value costs
// requests and time, never correctness.
type Tuning struct {
	// FullListFraction is the share of the listed collection that, once
	// changed, is fetched by one list of the collection, not per object.
	// Zero or less: 0.25, where one-object fetches cost as much as a
	// decoded list (e2e TestRecoveryFetchCost). Above 1: never.
	FullListFraction float64
	// FirstPageFraction is the share of a metadata list's first page that,
	// once changed, turns the recovery into one full list (with
	// Lister.ListObjectsWire only).
	// Zero or less: 0.05, where the full list wins at 100,000 Pods
	// (informerbench recover). Above 1: never.
	FirstPageFraction float64
	// MaxFetchRequests bounds a recovery's one-object fetch requests; more
	// changed objects are fetched by one list of the collection. Zero:
	// derived from Lister.QPS (what it allows in ten seconds, at least
	// 64), unbounded where QPS is zero or less. Negative: no
	// bound, whatever the rate limit.
	MaxFetchRequests int
	// NoPageAhead stops a streamed metadata list from asking for its next
	// page while it reads one. False: it asks ahead, which saves a round
	// trip per page.
	NoPageAhead bool
}

// RecoveryStats describes one recovery.
type RecoveryStats struct {
	// Listed is the number of items of the metadata list, Pages its pages.
	Listed, Pages int
	// Unchanged, Deleted and Fetch classify the stored and listed keys:
	// unchanged; gone or replaced by another UID; new, changed or replaced.
	// Ahead are stored objects newer than the list, listed or not (left by
	// an earlier recovery that did not finish), kept until the watch passes them.
	Unchanged, Deleted, Fetch, Ahead int
	// Requests is the number of fetch requests (one object, or the whole
	// collection); Fetched the objects they returned that were applied;
	// Skipped the fetched objects and watch events dropped because the
	// store already held their key at that resourceVersion or a newer one.
	Requests, Fetched, Skipped int
	// Decoded counts the objects decoded from the responses of the
	// recovery's list and fetches: those fetched, and of a list, those read
	// alone from its protobuf (the ones to fetch) or, for a list decoded
	// whole, all its items.
	Decoded int
	// FullList says the recovery's list was of whole objects, not of
	// metadata (the metadata list could not be made or compared; see
	// Lister.ListObjectsWire): the changed objects came from it, decoded alone, and
	// Fetched counts those applied.
	FullList bool
	// Duration is the time from the metadata list to the store's
	// consistency; ListDuration the part of it until the list was made
	// and its diff applied (the fetches and the watch take the rest).
	Duration, ListDuration time.Duration
}

// RecoveryObserver is a reflector.Observer that also hears of recoveries. A
// recovery's metadata list is reported through Listed (items and pages of
// the metadata list) once the store has applied its diff.
type RecoveryObserver interface {
	reflector.Observer
	// Recovered is called once a recovery has made the store consistent at
	// resourceVersion, on the reflector's goroutine.
	Recovered(cause reflector.StartCause, resourceVersion string, stats RecoveryStats)
}

// recover lists the collection's metadata (or, where that cannot be made
// or compared, the whole collection: recoverlist.go), has the store apply
// the diff and starts fetching what changed once the watch is open. It
// returns nil, nil if ctx ended, and reflector.ErrFullList if the reflector
// must list in full.
func (r *Recoverer) recover(ctx context.Context) (*recovery, error) {
	logger := klog.FromContext(ctx)
	cause := r.l.Cause()
	start := r.l.Clock().Now()
	ended := func() {}
	if r.started != nil {
		ended = sync.OnceFunc(r.started())
	}
	handedOn := false // to the recovery, which calls ended when it ends
	defer func() {
		if !handedOn {
			ended()
		}
	}()

	what := "metadata list"
	var l *recoveryList
	var err error
	if r.cfg.ListInFull {
		what = "full list"
		l, err = r.listForRecovery(ctx, cause, r.listFull)
	} else {
		l, err = r.listForRecovery(ctx, cause, r.listMetadata)
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	if why := fullListReason(l, err); why != "" && !r.cfg.ListInFull {
		logger.V(2).Info("Recovering from a full list", "reflector", r.l.Name(), "type", r.l.TypeDescription(), "why", why, "err", err)
		what = "full list"
		l, err = r.listForRecovery(ctx, cause, r.listFull)
	}
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, reflector.ErrFullList):
		logger.V(2).Info("The lister cannot list in full without decoding; listing through the ListerWatcher", "reflector", r.l.Name(), "type", r.l.TypeDescription())
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %s: %w", reflector.ErrList, r.l.TypeDescription(), what, err)
	}
	rec := newRecovery(r, cause, start)
	rec.setList(l)
	err = r.store.BeginRecovery(ctx, rec.diff)
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, ErrRecoveryUnsupported):
		return nil, reflector.ErrFullList
	case err != nil:
		return nil, fmt.Errorf("%w: beginning a recovery at resourceVersion %q: %w", reflector.ErrStore, l.rv, err)
	}
	// A full list holds the changed objects: decode them (only them).
	fromList, err := rec.decodeListed(l)
	if err != nil {
		// The store applied the diff and owes a list: the next attempt
		// recovers again.
		return nil, fmt.Errorf("%w: %s: %w", reflector.ErrList, r.l.TypeDescription(), err)
	}

	logger.V(2).Info("Recovering", "reflector", r.l.Name(), "type", r.l.TypeDescription(), "cause", cause,
		"resourceVersion", l.rv, "fullList", l.objects != nil, "listed", len(l.listed), "unchanged", rec.stats.Unchanged,
		"deleted", rec.stats.Deleted, "fetch", rec.stats.Fetch, "ahead", rec.stats.Ahead)
	if l.given {
		r.l.ListedEarlier(l.rv, len(l.listed), l.pages)
	} else {
		r.l.Listed(l.listedAt, l.rv, len(l.listed), l.pages)
	}
	rec.stats.ListDuration = r.l.Clock().Since(start) // before start: its fetches read stats
	rec.ended, handedOn = ended, true
	rec.start(ctx, fromList)
	return rec, nil
}

// recoveryList is what a recovery's diff is made against: the identity of
// every listed object and, for a full list, the objects themselves.
type recoveryList struct {
	// listedAt is the resourceVersion the list asked for, rv the one it
	// was served at; pages counts its responses.
	listedAt, rv string
	pages        int
	// given: the list is Hooks.Listed's, a consistent read (at "") made
	// before this recovery, which stands in for a list at listedAt.
	given  bool
	listed map[string]listedItem
	// objects are the listed objects by key, undecoded where the server
	// sent protobuf; nil for a metadata list.
	objects map[string]wireItem
}

// listForRecovery makes a recovery's list (list: listMetadata or listFull)
// at the relist resourceVersion, with NotOlderThan, and, if the server says
// that version is unavailable, once more as a consistent read at "". A list
// Hooks.Listed gave stands in only for a list at a version (listMetadata).
func (r *Recoverer) listForRecovery(ctx context.Context, cause reflector.StartCause, list func(context.Context, string) (*recoveryList, error)) (*recoveryList, error) {
	from := r.l.ResourceVersion()
	l, err := list(ctx, from)
	if r.l.Unavailable(err) {
		from = r.l.ResourceVersion()
		l, err = list(ctx, from)
	}
	if err != nil {
		return nil, err
	}
	l.listedAt = from
	return l, nil
}

// comparable reports whether every resourceVersion of the list is an
// integer (parsing them on the way), as the fetches of a recovery need.
func (l *recoveryList) comparable() bool {
	ok := true
	if _, good := parseRV(l.rv); !good {
		ok = false
	}
	for key, it := range l.listed {
		it.n, it.integer = parseRV(it.rv)
		ok = ok && it.integer
		l.listed[key] = it
	}
	return ok
}

// fullListReason says why a metadata list (l, or the error that ended it)
// cannot serve a recovery, which a full list then serves; "" if it can.
func fullListReason(l *recoveryList, err error) string {
	switch {
	case err != nil && metadataListUnsupported(err):
		return "the server cannot list this collection's metadata"
	case errors.Is(err, errManyChanged):
		return "the metadata list's first page shows much of the collection changed"
	case err == nil && !l.comparable():
		return "resourceVersions are not integers"
	}
	return ""
}

// metadataListUnsupported reports whether err says the server cannot serve
// the metadata list at all (as opposed to failing this time).
func metadataListUnsupported(err error) bool {
	return apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err)
}

// listOptions are the options of a recovery's list at resourceVersion:
// NotOlderThan it, or a consistent read at "".
func listOptions(resourceVersion string, limit int64) metav1.ListOptions {
	opts := metav1.ListOptions{ResourceVersion: resourceVersion, Limit: limit}
	if resourceVersion != "" {
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	return opts
}

// listedItem is one item of a recovery's list.
type listedItem struct {
	uid types.UID
	rv  string
	// n is rv as an integer, if it is one (integer).
	n       uint64
	integer bool
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
	r     *Recoverer
	cause reflector.StartCause
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
	// ended is Hooks.Started's function, called (once) when the
	// recovery ends, done or not.
	ended func()

	listRV string
	// listN is listRV as an integer, if it is one (listIntegers).
	listN        uint64
	listIntegers bool
	listed       map[string]listedItem
	fetchKeys    []string // the keys to fetch, sorted; set by diff

	// toFetch and listedAll are the plan's sizes, set by diff: the keys to
	// fetch, and every key listed or stored ahead of the list.
	toFetch, listedAll int
	// writes carries the fetch goroutines' writes to the reflector's
	// goroutine, which runs them between watch events (reflector.Relisted).
	writes chan func() error

	// Owned by the reflector's goroutine: the list, the watch loop and the
	// writes it runs.
	//
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
	// done: the store is consistent, and writes pass straight through.
	done  bool
	stats RecoveryStats

	// Shared with the fetch goroutines, without a lock.
	//
	// over is set once the recovery is done: fetches stop.
	over atomic.Bool
	// resolved are the keys no longer pending, which fetches skip.
	resolved sync.Map
	// requests and decoded count into stats.Requests and stats.Decoded.
	requests, decoded atomic.Int64
	// err is why the fetches failed; the first failure wins.
	err atomic.Pointer[error]
}

func newRecovery(r *Recoverer, cause reflector.StartCause, start time.Time) *recovery {
	return &recovery{
		r: r, cause: cause, began: start,
		ended:      func() {},
		opened:     make(chan struct{}),
		writes:     make(chan func() error),
		keys:       map[string]*keyState{},
		pending:    map[string]struct{}{},
		awaitWatch: map[string]struct{}{},
	}
}

// parseRV reads a resourceVersion as an etcd revision.
func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// version reads a resourceVersion as an etcd revision, if the recovery
// compares them (Recovery.OpaqueVersions).
func (rec *recovery) version(rv string) (uint64, bool) {
	if rec.r.cfg.OpaqueVersions {
		return 0, false
	}
	return parseRV(rv)
}

// setList records the list the diff is made against.
func (rec *recovery) setList(l *recoveryList) {
	l.comparable() // parses every resourceVersion
	if rec.r.cfg.OpaqueVersions {
		for key, it := range l.listed {
			it.n, it.integer = 0, false
			l.listed[key] = it
		}
	}
	n, ok := rec.version(l.rv)
	rec.listRV, rec.listN, rec.listIntegers, rec.listed = l.rv, n, ok, l.listed
	rec.watchN, rec.watchRV = n, l.rv
	rec.stats.Listed, rec.stats.Pages = len(l.listed), l.pages
	rec.stats.FullList = l.objects != nil
}

// diff compares the listed items with the stored Versions; the store calls
// it in order with its writes (RecoveryStore.BeginRecovery).
func (rec *recovery) diff(stored map[string]Version) (RecoveryPlan, error) {
	var plan RecoveryPlan
	fetch := func(key string) {
		rec.pending[key] = struct{}{}
		rec.fetchKeys = append(rec.fetchKeys, key)
	}
	for key, l := range rec.listed {
		s, had := stored[key]
		sn, parsed := rec.version(s.ResourceVersion)
		integers := parsed && l.integer
		sameUID := s.UID == "" || l.uid == "" || s.UID == l.uid
		// resourceVersions that are not integers (possible in a full
		// list) can only be told equal or not.
		sameRV := s.ResourceVersion != "" && s.ResourceVersion == l.rv
		if integers {
			sameRV = sn == l.n
		}
		switch {
		case !had:
			rec.keys[key] = &keyState{gone: true}
			fetch(key)
		case integers && sn > l.n:
			rec.keepAhead(key, s, sn)
		case sameRV && sameUID:
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
	for key, s := range stored {
		if _, ok := rec.listed[key]; ok {
			continue
		}
		// Absent from the list: deleted, unless it is newer than the list.
		// The list may be older than what an earlier recovery fetched (a
		// lagging apiserver serves it), so its absence says nothing then.
		if sn, ok := rec.version(s.ResourceVersion); ok && rec.listIntegers && sn > rec.listN {
			rec.keepAhead(key, s, sn)
			continue
		}
		plan.Deleted = append(plan.Deleted, key)
	}
	slices.Sort(plan.Deleted)
	slices.Sort(plan.Unchanged)
	slices.Sort(rec.fetchKeys)
	rec.stats.Unchanged, rec.stats.Deleted, rec.stats.Fetch = len(plan.Unchanged), len(plan.Deleted), len(rec.pending)
	rec.listed = nil // not needed any more
	return plan, nil
}

// keepAhead keeps the stored object at key, at resourceVersion sn, newer
// than the list: an earlier recovery fetched it and did not finish. The
// watch from the list's resourceVersion brings every later change of it,
// its deletion included. The store is consistent only once that watch has
// passed sn, so the recovery ends no earlier (mark).
func (rec *recovery) keepAhead(key string, s Version, sn uint64) {
	rec.keys[key] = &keyState{uid: s.UID, rv: sn}
	rec.mark = max(rec.mark, sn)
	rec.stats.Ahead++
}

// start applies what the list brought of the keys to fetch (fromList: a
// full list's changed objects, by key) and starts fetching the rest, which
// waits for the watch to open. It runs on the reflector's goroutine.
func (rec *recovery) start(ctx context.Context, fromList map[string]runtime.Object) {
	rec.ctx, rec.cancel = context.WithCancel(ctx)
	rec.toFetch = rec.stats.Fetch
	rec.listedAll = rec.stats.Unchanged + rec.stats.Fetch + rec.stats.Ahead
	// In key order, as the fetch of the collection applies its objects.
	for _, key := range slices.Sorted(maps.Keys(fromList)) {
		if err := rec.fetched(key, fromList[key]); err != nil {
			rec.r.l.Report(rec.ctx, fmt.Errorf("%w: listed %s: %w", reflector.ErrStore, key, err))
		}
	}
	rec.checkDone()
	if len(rec.pending) == 0 {
		return
	}
	rec.fetching.Go(func() { rec.r.fetchChanged(rec) })
}

// finish stops the fetches, waits for them, and returns why they failed.
// It runs on the reflector's goroutine, as ListAndWatch returns.
func (rec *recovery) finish() error {
	outer := context.Cause(rec.ctx) // before cancel: was it ended from outside?
	rec.cancel()
	rec.fetching.Wait()
	rec.over.Store(true)
	rec.ended()
	var err error
	if p := rec.err.Load(); p != nil {
		err = *p
	}
	select {
	case <-rec.opened:
	default:
		// A recovery that ended (nothing to fetch ends it before its
		// watch opens) needed no watch.
		if !rec.done && (outer == nil || err != nil) {
			// The watch never opened (refused, failing): without it no
			// recovery can end. List in full until a watch opens, as
			// client-go lists while its watches fail.
			rec.r.l.ListInFullUntilWatch()
		}
	}
	return err
}

// fail records err and ends the watch, so that ListAndWatch returns it and
// Run starts over after backoff.
func (rec *recovery) fail(err error) {
	if !rec.over.Load() {
		rec.err.CompareAndSwap(nil, &err)
	}
	rec.cancel()
}

// watchOpened is called whenever a watch was accepted.
func (rec *recovery) watchOpened() { rec.openedOnce.Do(func() { close(rec.opened) }) }

// run hands fn to the reflector's goroutine, which runs it between watch
// events, and waits for it to have run. It reports false if the recovery
// ended first.
func (rec *recovery) run(fn func()) bool {
	ran := make(chan struct{})
	select {
	case rec.writes <- func() error { fn(); close(ran); return nil }:
	case <-rec.ctx.Done():
		return false
	}
	<-ran // the watch loop runs it as soon as it takes it
	return true
}
