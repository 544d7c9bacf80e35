package recovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
	"github.com/boltinformer/boltinformer/reflector"
)

// The list Hooks.Listed gives (the informer's proof list) is a consistent
// read taken at the informer's start. It may predate the short watch's
// limit=1 read that gave the catch-up its target, so it is not at or past
// that read. Here the read gives the target 20, the watch is answered 410
// in its stream (an apiserver restart), and the recovery takes the given
// list, made at 9. The catch-up must not be settled on it: the store, at 9,
// is short of the target. The watch from 9 stays short, so the
// apiserver's bookmark brings the store to the target within a second.
// Settled, it would be an ordinary watch, waiting minutes for an event or
// the once-a-minute bookmark.
func TestGivenListOlderThanTheTargetDoesNotEndTheShortWatches(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("9", upod("ns", "a", "ua", "1")), nil
		},
		objects: server("9"),
	}
	targets := make(chan string, 1)
	watchers := make(chan *watch.RaceFreeFakeWatcher, 10)
	h := startRecovery(t, store, lister, "", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		o.ResumeResourceVersion = "2"
		o.CatchUp = &reflector.CatchUp{Done: make(chan struct{}), Target: func(rv string) { targets <- rv }}
		// The informer's proof list, a consistent read taken at its start.
		o.Recovery.Listed = func(context.Context) *Listing {
			return &Listing{ResourceVersion: "9", Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
		}
		lw.List = func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				return reflectortest.PodList("20"), nil // the short watch's consistent read
			}
			return nil, fmt.Errorf("unexpected list %+v", opts)
		}
		lw.Watch = func(int, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			watchers <- w
			return w, nil
		}
	})
	defer h.stop()

	next := func(what string) *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case w := <-watchers:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	first := next("first watch")
	select {
	case rv := <-targets:
		if rv != "20" {
			t.Fatalf("target %q, want 20", rv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the short watch's read gave no target")
	}
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 2 (15)"})
	next("watch after the recovery")
	store.waitFor(t, "end@9")

	opts := h.lw.WatchOpts()
	if len(opts) < 2 {
		t.Fatalf("watches %v", h.lw.WatchRVs())
	}
	got := opts[1]
	if got.ResourceVersion != "9" || got.TimeoutSeconds == nil {
		t.Fatalf("watch after the recovery: %+v", got)
	}
	if s := *got.TimeoutSeconds; s != int64(reflector.DefaultCatchUpWatchTimeout/time.Second) {
		t.Errorf("the watch from the given list's 9 has timeoutSeconds=%d: the catch-up was settled by a list older than its target 20, "+
			"and the store waits for an ordinary watch's event or bookmark; want a short watch (%d s) while the store is short of the target",
			s, int64(reflector.DefaultCatchUpWatchTimeout/time.Second))
	}
}

// After MaxWatches short watches without a bookmark, the reflector
// relists at "", which CatchUp promises is at or after the read's version.
// With a recovery that relist is the recovery's, and the list Hooks.Listed
// gives, taken at the start before the reads, must not stand in for it.
// Here the reads give the target 20, two short watches close without a
// bookmark, and the given list is at 9. The recovery must list at "" (25
// here) and end there, settling the catch-up. Recovering from the given
// list would end at 9 and settle. On a server that sends no bookmarks, the
// informer would then wait for an event that a quiet collection never sends.
func TestRelistAfterMaxWatchesIsAtOrAfterTheRead(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("25", upod("ns", "a", "ua", "1")), nil // a list made now
		},
		objects: server("25"),
	}
	targets := make(chan string, 1)
	watchers := make(chan *watch.RaceFreeFakeWatcher, 10)
	h := startRecovery(t, store, lister, "", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		o.ResumeResourceVersion = "2"
		o.CatchUp = &reflector.CatchUp{Done: make(chan struct{}), MaxWatches: 2, Target: func(rv string) { targets <- rv }}
		o.Recovery.Listed = func(context.Context) *Listing {
			return &Listing{ResourceVersion: "9", Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
		}
		lw.List = func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				return reflectortest.PodList("20"), nil
			}
			return nil, fmt.Errorf("unexpected list %+v", opts)
		}
		lw.Watch = func(int, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			watchers <- w
			return w, nil
		}
	})
	defer h.stop()
	next := func(what string) *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case w := <-watchers:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	first := next("first watch")
	select {
	case <-targets:
	case <-time.After(10 * time.Second):
		t.Fatal("the short watch's read gave no target")
	}
	first.Stop() // the server's timeout, no bookmark
	next("second short watch").Stop()
	next("watch after the relist")
	var end string
	poll.Until(t, 10*time.Second, "the recovery's end", func() bool {
		for _, c := range store.Calls() {
			if strings.HasPrefix(c, "end@") {
				end = c
				return true
			}
		}
		return false
	})

	calls := store.Calls()
	if end != "end@25" {
		t.Errorf("the relist at \"\" after MaxWatches ended the recovery with %q (store calls %v), metadata lists %d: "+
			"it recovered from the given list at 9, older than the read's 20, and asked the server nothing; want a list at or after 20",
			end, calls, len(lister.MetaOpts()))
	}
	// The relist at "" was made after the reads: it settles the catch-up.
	opts := h.lw.WatchOpts()
	if len(opts) < 3 {
		t.Fatalf("watches %v", h.lw.WatchRVs())
	}
	if got := opts[2]; got.ResourceVersion != "25" || got.TimeoutSeconds == nil || *got.TimeoutSeconds == int64(reflector.DefaultCatchUpWatchTimeout/time.Second) {
		t.Errorf("the watch after the relist at \"\": %+v; want an ordinary watch from 25", got)
	}
}

// catchUpConfig is one seed's schedule for TestCatchUpSettlesAtOrPastItsTarget.
type catchUpConfig struct {
	Tick       time.Duration // etcd's revision grows by one each Tick; 0: never
	WatchDelay time.Duration // until the first watch is accepted
	Given      time.Duration // when the given list is taken; -1: none
	First      string        // the first watch: ok, refused (410), or expired in its stream
	ExpiredAt  time.Duration // when the stream's 410 comes
	Lag        int64         // how far a NotOlderThan list's watch cache lags etcd
	Bookmarks  bool          // a watch gets a bookmark a second before its timeout
	ReadsFail  string        // never, first or always
	MaxWatches int
}

// Recoveries with a catch-up, in random orders of the given list, the
// limit=1 reads and the relists. A relist follows a 410, refused or in the
// stream, or MaxWatches short watches. etcd's revision grows with time, so
// a list or read made later is at a later version. The store is caught up
// (Done closes) once it applies its target, as cache.Informer's is. The
// catch-up may end its short watches only at or past its target. So every
// ordinary watch made while the store is short of the target must start at
// or past it. Every target is a read made after the start. Within two
// minutes the store catches up, relisting at "" for it at most once. Two
// defects broke the first rule and the third. A given list older than a
// read settled the catch-up. The relist after MaxWatches recovered from the
// given list instead of reading.
func TestCatchUpSettlesAtOrPastItsTarget(t *testing.T) {
	for seed := range 300 {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkRandomCatchUp(t, uint64(seed)) })
		})
	}
}

func checkRandomCatchUp(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xca7c))
	cfg := catchUpConfig{
		Tick:       []time.Duration{0, 100 * time.Millisecond, time.Second}[rng.IntN(3)],
		WatchDelay: []time.Duration{0, 500 * time.Millisecond, 2 * time.Second}[rng.IntN(3)],
		Given:      []time.Duration{-1, 0, time.Second, 3 * time.Second}[rng.IntN(4)],
		First:      []string{"ok", "refused", "expired", "expired"}[rng.IntN(4)], // a 410 in the stream is the common one
		ExpiredAt:  []time.Duration{0, time.Second}[rng.IntN(2)],
		Lag:        []int64{0, 3, 1000}[rng.IntN(3)],
		Bookmarks:  rng.IntN(2) == 0,
		ReadsFail:  []string{"never", "first", "always"}[rng.IntN(3)],
		MaxWatches: []int{1, 2, 5}[rng.IntN(3)],
	}
	const stored, atStart = 2, 10
	began := time.Now()
	revAt := func(since time.Duration) int64 { // etcd's newest revision then
		if cfg.Tick == 0 {
			return atStart
		}
		return atStart + int64(since/cfg.Tick)
	}
	rev := func() int64 { return revAt(time.Since(began)) }

	var mu sync.Mutex
	var log, broken []string
	var target int64 // 0: none yet
	var applied int64 = stored
	done := make(chan struct{})
	note := func(format string, args ...any) {
		log = append(log, fmt.Sprintf("%5dms ", time.Since(began).Milliseconds())+fmt.Sprintf(format, args...))
	}
	caughtUp := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	// checkLocked closes done once the store has applied the target.
	checkLocked := func() {
		if target != 0 && applied >= target && !caughtUp() {
			note("caught up")
			close(done)
		}
	}
	store := &catchUpStore{fakeStore: newFakeStore(upod("ns", "a", "ua", "1")), applied: func(rv string) {
		mu.Lock()
		defer mu.Unlock()
		n, _ := strconv.ParseInt(rv, 10, 64)
		note("store at %d", n)
		applied = max(applied, n)
		checkLocked()
	}}
	lister := &fakeLister{
		meta: func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			mu.Lock()
			defer mu.Unlock()
			at := rev()
			if opts.ResourceVersion != "" {
				at = max(stored, at-cfg.Lag) // the watch cache's position
			}
			note("metadata list at %q: %d", opts.ResourceVersion, at)
			return metaList(strconv.FormatInt(at, 10), upod("ns", "a", "ua", "1")), nil
		},
		objects: server("0"),
	}
	var givenTaken atomic.Bool
	obs := &reflectortest.RecordingObserver[reflector.StartCause]{}
	lw := &reflectortest.ScriptedLW{T: t}
	reads := 0
	lw.List = func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if opts.Limit != 1 || opts.ResourceVersion != "" {
			return nil, fmt.Errorf("unexpected list %+v", opts)
		}
		reads++
		if cfg.ReadsFail == "always" || (cfg.ReadsFail == "first" && reads == 1) {
			note("read fails")
			return nil, errors.New("connection reset by peer")
		}
		note("read: %d", rev())
		return reflectortest.PodList(strconv.FormatInt(rev(), 10)), nil
	}
	short := int64(reflector.DefaultCatchUpWatchTimeout / time.Second)
	lw.Watch = func(n int, opts metav1.ListOptions) (watch.Interface, error) {
		if n == 0 {
			time.Sleep(cfg.WatchDelay)
		}
		mu.Lock()
		defer mu.Unlock()
		from, _ := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		timeout := *opts.TimeoutSeconds
		note("watch from %d, timeoutSeconds=%d", from, timeout)
		if timeout != short && !caughtUp() && from < target {
			broken = append(broken, fmt.Sprintf("an ordinary watch from %d while the store is short of the target %d", from, target))
		}
		if n == 0 && cfg.First == "refused" {
			return nil, apierrors.NewResourceExpired("too old resource version")
		}
		w := watch.NewRaceFreeFake()
		if n == 0 && cfg.First == "expired" {
			time.AfterFunc(cfg.ExpiredAt, func() {
				w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
			})
		}
		d := time.Duration(timeout) * time.Second
		if cfg.Bookmarks {
			time.AfterFunc(d-time.Second, func() {
				if at := rev(); at > from {
					w.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(at, 10)}})
				}
			})
		}
		time.AfterFunc(d, w.Stop)
		return w, nil
	}
	opts := testOptions{Options: reflector.Options{
		ExpectedType:          &v1.Pod{},
		InitialBackoff:        time.Millisecond,
		MaxBackoff:            4 * time.Millisecond,
		WatchErrorHandler:     func(context.Context, error) {},
		Observer:              obs,
		ResumeResourceVersion: strconv.Itoa(stored),
		CatchUp: &reflector.CatchUp{Done: done, MaxWatches: cfg.MaxWatches, Target: func(rv string) {
			mu.Lock()
			defer mu.Unlock()
			n, _ := strconv.ParseInt(rv, 10, 64)
			note("target %d", n)
			if n < atStart {
				broken = append(broken, fmt.Sprintf("the target %d is older than the server at the start (%d)", n, atStart))
			}
			target = n
			checkLocked()
		}},
	}, Recovery: &testRecovery{Lister: lister, Workers: 1, FullListFraction: 2}}
	if cfg.Given >= 0 {
		// The informer's proof list: a consistent read taken at Given,
		// handed once, waited for while it is being taken.
		opts.Recovery.Listed = func(ctx context.Context) *Listing {
			if !givenTaken.CompareAndSwap(false, true) {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cfg.Given - time.Since(began)):
			}
			mu.Lock()
			defer mu.Unlock()
			at := revAt(cfg.Given)
			note("given list at %d", at)
			return &Listing{ResourceVersion: strconv.FormatInt(at, 10), Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
		}
	}
	r := newReflector(lw.ListWatch(), store, opts)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.Run(ctx)
	}()
	time.Sleep(2 * time.Minute)
	cancel()
	<-stopped

	mu.Lock()
	defer mu.Unlock()
	if !caughtUp() {
		broken = append(broken, fmt.Sprintf("not caught up two minutes after the start: the store at %d, the target %d", applied, target))
	}
	starts := obs.Starts()
	if n := len(slices.DeleteFunc(slices.Clone(starts), func(s string) bool { return !strings.Contains(s, string(reflector.CauseRelistCatchUp)) })); n > 1 {
		broken = append(broken, fmt.Sprintf("catching up relisted %d times, not at most once: %v", n, starts))
	}
	if len(broken) > 0 {
		t.Errorf("seed %d %+v:\n%s\nfirst events:\n%s", seed, cfg, strings.Join(broken, "\n"), strings.Join(log[:min(len(log), 60)], "\n"))
	}
}

// catchUpStore is a fakeStore that reports the version it applies
// with each recovery's end and each bookmark.
type catchUpStore struct {
	*fakeStore
	applied func(rv string)
}

func (s *catchUpStore) End(rv string) error {
	defer s.applied(rv)
	return s.fakeStore.End(rv)
}

func (s *catchUpStore) Bookmark(rv string) error {
	defer s.applied(rv)
	return s.fakeStore.Bookmark(rv)
}
