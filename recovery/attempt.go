package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// recover lists the collection's metadata, has the store apply the diff and
// starts fetching what changed once the watch is open. Where the metadata
// list cannot be made or compared, it lists the whole collection
// (fulllist.go). It returns nil, nil if ctx ended. It returns
// reflector.ErrFullList if the reflector must list in full.
func (r *Relister) recover(ctx context.Context) (*attempt, error) {
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
	var l *diffList
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
	err = r.store.Begin(ctx, rec.diff)
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, ErrUnsupported):
		return nil, reflector.ErrFullList
	case err != nil:
		return nil, fmt.Errorf("%w: beginning a recovery at resourceVersion %q: %w", reflector.ErrStore, l.rv, err)
	}
	// A full list holds the changed objects. Decode them, and only them.
	fromList, err := rec.decodeListed(l)
	if err != nil {
		// The store applied the diff and owes a list. So the next attempt
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

// listForRecovery makes a recovery's list with list, listMetadata or
// listFull. It lists at the relist resourceVersion, with NotOlderThan. If the
// server says that version is unavailable, it lists once more as a
// consistent read at "". A list Hooks.Listed gave stands in only for a list
// at a version (listMetadata).
func (r *Relister) listForRecovery(ctx context.Context, cause reflector.StartCause, list func(context.Context, string) (*diffList, error)) (*diffList, error) {
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

// fullListReason says why a metadata list cannot serve a recovery, which a
// full list then serves. It judges l, or err, the error that ended it. It
// returns "" if the metadata list can serve.
func fullListReason(l *diffList, err error) string {
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
// the metadata list at all. A list that failed this time is not unsupported.
func metadataListUnsupported(err error) bool {
	return apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err)
}

// listOptions are the options of a recovery's list at resourceVersion. They
// ask for NotOlderThan it, or for a consistent read at "".
func listOptions(resourceVersion string, limit int64) metav1.ListOptions {
	opts := metav1.ListOptions{ResourceVersion: resourceVersion, Limit: limit}
	if resourceVersion != "" {
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	return opts
}

// keyState is what a recovery knows of a key's state in the store. That is
// the last state it handed the store, or else the stored one.
type keyState struct {
	uid  types.UID
	rv   uint64
	gone bool // not in the store
	// obj is the object last handed to the store. Nil means the stored one.
	obj interface{}
}

// attempt is one recovery in progress. The package documentation tells its
// steps.
//
// Two goroutines run it. The reflector's runs ListAndWatch, then the watch
// loop, whose events reach the store through the attempt as the
// Relisted.Store. One fetch goroutine is started by start and joined by
// finish. That goroutine runs the fetch requests on up to Options.Workers
// goroutines of its own and joins them.
type attempt struct {
	r     *Relister
	cause reflector.StartCause
	began time.Time
	// ctx is the watch's context. A failed fetch calls cancel, which ends
	// it and the fetches with it.
	ctx    context.Context
	cancel context.CancelFunc
	// opened is closed when the first watch is accepted. Fetching waits
	// for it.
	opened     chan struct{}
	openedOnce sync.Once
	fetching   sync.WaitGroup
	// ended is Hooks.Started's function. It is called once when the
	// recovery ends, done or not.
	ended func()

	listRV string
	// listN is listRV as an integer, if it is one (listIntegers).
	listN        uint64
	listIntegers bool
	listed       map[string]listedItem
	fetchKeys    []string // the keys to fetch, sorted, set by diff

	// toFetch and listedAll are the plan's sizes, set by diff. toFetch
	// counts the keys to fetch. listedAll counts every key listed or stored
	// ahead of the list.
	toFetch, listedAll int
	// writes carries the fetch goroutines' writes to the reflector's
	// goroutine, which runs them between watch events (reflector.Relisted).
	writes chan func() error

	// The fields below are owned by the reflector's goroutine. It makes
	// the list, runs the watch loop and runs the writes.
	//
	// keys holds the keys the forward rule must know. Those are the keys
	// whose stored state is not the listed one, and every key written since.
	keys map[string]*keyState
	// pending are the keys still to be fetched. awaitWatch are those a
	// fetch found gone. The watch event that deletes each resolves it.
	pending, awaitWatch map[string]struct{}
	// watchN and watchRV are the watch's position. That is its latest
	// event or bookmark, or else the list's resourceVersion. mark is the
	// resourceVersion the watch must pass for the store to be consistent.
	watchN  uint64
	watchRV string
	mark    uint64
	// done says the store is consistent. Writes then pass straight through.
	done  bool
	stats Stats

	// The fields below are shared with the fetch goroutines, without a
	// lock.
	//
	// over is set once the recovery is done. Fetches stop then.
	over atomic.Bool
	// resolved are the keys no longer pending, which fetches skip.
	resolved sync.Map
	// requests and decoded count into stats.Requests and stats.Decoded.
	requests, decoded atomic.Int64
	// err is why the fetches failed. The first failure wins.
	err atomic.Pointer[error]
}

func newRecovery(r *Relister, cause reflector.StartCause, start time.Time) *attempt {
	return &attempt{
		r: r, cause: cause, began: start,
		ended:      func() {},
		opened:     make(chan struct{}),
		writes:     make(chan func() error),
		keys:       map[string]*keyState{},
		pending:    map[string]struct{}{},
		awaitWatch: map[string]struct{}{},
	}
}

// start applies what the list brought of the keys to fetch, and starts
// fetching the rest. fromList holds a full list's changed objects, by key.
// The fetching waits for the watch to open. start runs on the reflector's
// goroutine.
func (rec *attempt) start(ctx context.Context, fromList map[string]runtime.Object) {
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
func (rec *attempt) finish() error {
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
		// A recovery that ended needed no watch. Nothing to fetch ends it
		// before its watch opens.
		if !rec.done && (outer == nil || err != nil) {
			// The watch never opened, refused or failing. Without it no
			// recovery can end. List in full until a watch opens, as
			// client-go lists while its watches fail.
			rec.r.l.ListInFullUntilWatch()
		}
	}
	return err
}

// fail records err and ends the watch, so that ListAndWatch returns it and
// Run starts over after backoff.
func (rec *attempt) fail(err error) {
	if !rec.over.Load() {
		rec.err.CompareAndSwap(nil, &err)
	}
	rec.cancel()
}

// watchOpened is called whenever a watch was accepted.
func (rec *attempt) watchOpened() { rec.openedOnce.Do(func() { close(rec.opened) }) }

// run hands fn to the reflector's goroutine, which runs it between watch
// events, and waits for it to have run. It reports false if the recovery
// ended first.
func (rec *attempt) run(fn func()) bool {
	ran := make(chan struct{})
	select {
	case rec.writes <- func() error { fn(); close(ran); return nil }:
	case <-rec.ctx.Done():
		return false
	}
	<-ran // the watch loop runs it as soon as it takes it
	return true
}
