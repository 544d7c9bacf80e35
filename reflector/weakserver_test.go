package reflector

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/listrules"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

var weakSeeds = flag.Int("weakserver.seeds", 200, "seeds of TestListsAgainstAWeakServer")

// weakServer is kube-apiserver as weak as the API allows, for one
// collection of Pods: etcd keeps every revision from compacted on, and one
// watch cache, which may lag etcd, serves what the delegator gives it
// (listrules.Of). A consistent read brings the cache to etcd's newest
// revision first. "0" and NotOlderThan are served at the cache's position,
// NotOlderThan once the cache has reached the version (504 "Too large
// resource version" above the newest). Exact reads and continue tokens
// come from etcd at exactly their revision (410 below compacted). A watch
// from a version below windowStart expires (410); a restart moves
// windowStart to the newest revision and ends every watch.
//
// It checks every list against the rules (listrules.Relist), with the
// version the store holds when the list is made.
type weakServer struct {
	t     *testing.T
	store *weakStore

	mu        sync.Mutex
	rng       *rand.Rand
	rev       int64 // etcd's newest revision
	compacted int64 // etcd's oldest revision
	pos       int64 // the watch cache has applied every change up to pos ≤ rev
	window    int64 // windowStart: a watch from an older version expires
	lag       bool  // pos may stay behind rev
	zeroPaged bool  // a list at "0" honours its limit (no watch cache)
	// compactPages: a continued request may find its token compacted.
	compactPages bool
	history      []change
	watches      []*modelWatch
	lists        []string // every list request, for the failure's report
	broken       []string // the rules the client broke
}

// change is one write: name's state at rev, or its deletion.
type change struct {
	rev     int64
	name    string
	deleted bool
}

// modelWatch is one open watch: it has been sent every change up to sent.
type modelWatch struct {
	w     *watch.RaceFreeFakeWatcher
	from  int64
	sent  int64
	ended bool
}

// stateAt returns each object's resourceVersion at revision r.
func (s *weakServer) stateAt(r int64) map[string]string {
	out := map[string]string{}
	for _, c := range s.history {
		if c.rev > r {
			break
		}
		if c.deleted {
			delete(out, c.name)
		} else {
			out[c.name] = strconv.FormatInt(c.rev, 10)
		}
	}
	return out
}

// writeLocked makes one change and lets the cache follow.
func (s *weakServer) writeLocked() {
	s.rev++
	name := fmt.Sprintf("p%d", s.rng.IntN(5))
	_, exists := s.stateAt(s.rev - 1)[name]
	s.history = append(s.history, change{rev: s.rev, name: name, deleted: exists && s.rng.IntN(3) == 0})
	s.followLocked()
}

// followLocked moves the cache forward (all the way unless it lags) and
// sends the watches what it has applied.
func (s *weakServer) followLocked() {
	switch {
	case !s.lag:
		s.pos = s.rev
	case s.pos < s.rev:
		s.pos += s.rng.Int64N(s.rev - s.pos + 1)
	}
	for _, mw := range s.watches {
		s.sendLocked(mw)
	}
}

// sendLocked sends mw the changes the cache applied since it last sent.
func (s *weakServer) sendLocked(mw *modelWatch) {
	if mw.ended {
		return
	}
	for _, c := range s.history {
		if c.rev <= mw.sent || c.rev > s.pos {
			continue
		}
		obj := reflectortest.Pod(c.name, strconv.FormatInt(c.rev, 10))
		_, existed := s.stateAt(c.rev - 1)[c.name]
		switch {
		case c.deleted:
			mw.w.Delete(obj)
		case existed:
			mw.w.Modify(obj)
		default:
			mw.w.Add(obj)
		}
	}
	mw.sent = max(mw.sent, s.pos)
}

// restartLocked restarts the apiserver: its watches end, writes made
// meanwhile (through other apiservers) reach none of them, and its new
// watch cache starts at etcd's newest revision.
func (s *weakServer) restartLocked() {
	for _, mw := range s.watches {
		mw.ended = true
		mw.w.Stop()
	}
	for range s.rng.IntN(3) {
		s.writeLocked()
	}
	s.pos, s.window = s.rev, s.rev
	s.watches = nil
}

func (s *weakServer) list(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.store.held()
	s.lists = append(s.lists, fmt.Sprintf("list rv=%q match=%q limit=%d continue=%q (held %s)",
		opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue, held))
	sem, err := listrules.Of(opts)
	if err != nil {
		s.broken = append(s.broken, err.Error())
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := listrules.Relist(opts, held); err != nil {
		s.broken = append(s.broken, err.Error())
	}
	s.followLocked()
	var at int64
	start, limit := 0, opts.Limit
	switch sem {
	case listrules.Consistent:
		s.pos = s.rev
		at = s.rev
	case listrules.Any:
		at = s.pos
		if !s.zeroPaged {
			limit = 0 // the watch cache ignores it
		}
	case listrules.NotOlderThan:
		x := mustInt(opts.ResourceVersion)
		if x > s.rev {
			return nil, tooLargeRV()
		}
		s.pos = max(s.pos, x) // the cache waits until it gets there
		at = s.pos
	case listrules.Exact:
		at = mustInt(opts.ResourceVersion)
		if at > s.rev {
			return nil, tooLargeRV()
		}
	case listrules.Continue:
		rev, off, _ := strings.Cut(opts.Continue, "/")
		at, start = mustInt(rev), atoi(off)
		if s.compactPages && s.rng.IntN(3) == 0 {
			s.writeLocked()
			s.compacted = s.rev
		}
	}
	if at < s.compacted && (sem == listrules.Exact || sem == listrules.Continue) {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", at, s.compacted))
	}
	state := s.stateAt(at)
	names := make([]string, 0, len(state))
	for name := range state {
		names = append(names, name)
	}
	slices.Sort(names)
	l := reflectortest.PodList(strconv.FormatInt(at, 10))
	end := len(names)
	if limit > 0 && start+int(limit) < end {
		end = start + int(limit)
		l.Continue = fmt.Sprintf("%d/%d", at, end)
	}
	for _, name := range names[start:end] {
		l.Items = append(l.Items, *reflectortest.Pod(name, state[name]))
	}
	return l, nil
}

func (s *weakServer) watch(opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	if err != nil || from == 0 {
		s.broken = append(s.broken, fmt.Sprintf("a watch from %q: the reflector watches from a list's or an event's version", opts.ResourceVersion))
		return nil, apierrors.NewBadRequest("unexpected watch")
	}
	w := watch.NewRaceFreeFake()
	if from < s.window {
		if s.rng.IntN(2) == 0 {
			return nil, apierrors.NewResourceExpired("too old resource version")
		}
		w.Error(&expiredStatus) // as a restarted kube-apiserver tells it
		return w, nil
	}
	mw := &modelWatch{w: w, from: from, sent: from}
	s.watches = append(s.watches, mw)
	s.followLocked()
	timeout := time.Duration(*opts.TimeoutSeconds) * time.Second
	// The watch cache's bookmark comes before the deadline, and only
	// past the watch's start.
	time.AfterFunc(timeout-time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.followLocked()
		if !mw.ended && s.pos > mw.from {
			w.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(s.pos, 10)}})
		}
	})
	time.AfterFunc(timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		mw.ended = true
		w.Stop()
	})
	return w, nil
}

// weakStore is a catchUpStore that knows the version it holds, and checks
// that no list takes it back in time.
type weakStore struct {
	*catchUpStore
	srv *weakServer

	mu       sync.Mutex
	version  int64 // the version the store holds; 0: none
	backward []string
}

func (s *weakStore) held() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == 0 {
		return ""
	}
	return strconv.FormatInt(s.version, 10)
}

func (s *weakStore) applied(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = max(s.version, mustInt(rv))
}

func (s *weakStore) Add(obj interface{}) error {
	defer s.applied(rvOf(obj))
	return s.catchUpStore.Add(obj)
}

func (s *weakStore) Update(obj interface{}) error {
	defer s.applied(rvOf(obj))
	return s.catchUpStore.Update(obj)
}

func (s *weakStore) Delete(obj interface{}) error {
	defer s.applied(rvOf(obj))
	return s.catchUpStore.Delete(obj)
}

func (s *weakStore) Bookmark(rv string) error {
	defer s.applied(rv)
	return s.catchUpStore.Bookmark(rv)
}

func (s *weakStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	if n := mustInt(rv); n < s.version {
		s.backward = append(s.backward, fmt.Sprintf("a list at %s replaced the store at %d", rv, s.version))
	}
	s.version = mustInt(rv)
	s.mu.Unlock()
	return s.catchUpStore.Replace(list, rv)
}

// weakPages is a cold start's PagedList into a weakStore: its pages are
// stored without a version, which the list's end records.
type weakPages struct{ s *weakStore }

func (p weakPages) ListPage(_ context.Context, items []interface{}) error {
	p.s.Load(items)
	return nil
}

func (p weakPages) ListDone(_ context.Context, rv string) error {
	p.s.applied(rv)
	p.s.note(rv)
	return nil
}

// weakRelister has the reflector list in full, and checks that it is asked
// only by a reflector whose store holds a version to recover from.
type weakRelister struct{ srv *weakServer }

func (w weakRelister) Relist(context.Context, *Relist) (*Relisted, error) {
	if held := w.srv.store.held(); held == "" {
		w.srv.mu.Lock()
		w.srv.broken = append(w.srv.broken, "a Relister was asked to recover a store that holds no version")
		w.srv.mu.Unlock()
	}
	return nil, ErrFullList
}

func rvOf(obj interface{}) string {
	_, rv := reflectortest.NameRV(obj)
	return rv
}

// weakConfig is one seed's setup.
type weakConfig struct {
	Start     string // cold, resume or listFrom
	CatchUp   bool
	PageSize  int64
	ZeroPaged bool
	Lag       bool
	Expired   bool // the stored version is below the watch window at the start
	// Paged: a cold start lists through a PagedList, and continue tokens
	// may expire between pages. Relister: a Relister, which must be asked
	// only by a reflector that has recorded a version, lists in full.
	Paged, Relister bool
}

// Every list the reflector makes is checked against a weak apiserver in
// random schedules. A schedule mixes writes, restarts that expire every
// watch, and compactions, also between a paged cold list's pages. Its watch
// cache may lag etcd, and its lists at "0" may come back paged or not. It
// varies page sizes, and cold starts with or without a PagedList. It
// varies resumes and ListFrom, with and without CatchUp and a Relister.
// Every list must follow the API's rule for a store that holds a version (never
// older, never an exact read: listrules.Relist). A Relister is asked only
// by a reflector that has a version to recover from. No list may take the
// store back. A catch-up's target must be a read made at or after the
// start (at least the newest revision then). Once writes stop and the
// cache catches up, the store settles on the server's state. The exact
// relists of a paged reflector broke the first rule and never settled; a
// cold start that recovered after a failed paged list broke the second; a
// catch-up that took a lagging relist as its target broke the fourth.
func TestListsAgainstAWeakServer(t *testing.T) {
	for seed := range *weakSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runWeakServer(t, uint64(seed)) })
		})
	}
}

func runWeakServer(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := weakConfig{
		Start:     []string{"cold", "resume", "resume", "listFrom"}[rng.IntN(4)],
		CatchUp:   rng.IntN(2) == 0,
		PageSize:  []int64{0, 0, 1, 2, 3}[rng.IntN(5)],
		ZeroPaged: rng.IntN(3) == 0,
		Lag:       rng.IntN(2) == 0,
		Expired:   rng.IntN(2) == 0,
	}
	more := rand.New(rand.NewPCG(seed, 0xa11)) // draws added later keep the seeds' schedules
	cfg.Paged, cfg.Relister = more.IntN(2) == 0, more.IntN(2) == 0
	if cfg.Start == "cold" {
		cfg.CatchUp = false // a cold start's list is its read
	} else {
		cfg.Paged = false // only a cold start's first list is paged
	}
	srv := &weakServer{t: t, rng: rand.New(rand.NewPCG(seed, 0x5e7e7)), compacted: 1, zeroPaged: cfg.ZeroPaged, compactPages: cfg.Paged}
	for range 4 + rng.IntN(6) {
		srv.writeLocked()
	}
	stored := 1 + rng.Int64N(srv.rev) // the version a warm store holds
	srv.lag = cfg.Lag
	if cfg.Lag {
		srv.pos = stored + rng.Int64N(srv.rev-stored+1)
	}
	srv.window = stored
	if cfg.Expired {
		srv.window = stored + 1
	}
	started := srv.rev // a read made at or after the start is at least this

	cs := newCatchUpStore()
	store := &weakStore{catchUpStore: cs, srv: srv}
	srv.store = store
	opts := Options{
		ExpectedType:      &v1.Pod{},
		PageSize:          cfg.PageSize,
		InitialBackoff:    100 * time.Millisecond,
		MaxBackoff:        time.Second,
		WatchErrorHandler: func(_ context.Context, _ error) {},
	}
	if cfg.Start != "cold" {
		var objs []interface{}
		for name, rv := range srv.stateAt(stored) {
			objs = append(objs, reflectortest.Pod(name, rv))
		}
		if err := cs.RecordingStore.Replace(objs, strconv.FormatInt(stored, 10)); err != nil {
			t.Fatal(err)
		}
		store.version = stored
		cs.note(strconv.FormatInt(stored, 10))
		if cfg.Start == "resume" {
			opts.ResumeResourceVersion = strconv.FormatInt(stored, 10)
		} else {
			opts.ListFrom = strconv.FormatInt(stored, 10)
		}
	}
	if cfg.CatchUp {
		opts.CatchUp = &CatchUp{Target: cs.Target, Done: cs.done}
	}
	if cfg.Paged {
		opts.PagedList = weakPages{store}
	}
	if cfg.Relister {
		opts.Relister = weakRelister{srv}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) { return srv.list(o) },
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return srv.watch(o)
		},
	}
	r := New(lw, store, opts)
	stop := runInBubble(r)

	for range 30 {
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		srv.mu.Lock()
		switch n := rng.IntN(10); {
		case n < 6:
			srv.writeLocked()
		case n < 7:
			srv.restartLocked()
		case n < 8:
			srv.compacted += rng.Int64N(srv.rev - srv.compacted + 1)
		case n < 9:
			srv.lag = !srv.lag
			srv.followLocked()
		default:
			srv.followLocked()
		}
		srv.mu.Unlock()
	}
	// Writes stop and the cache catches up: the store must settle.
	srv.mu.Lock()
	srv.lag = false
	srv.followLocked()
	srv.mu.Unlock()
	time.Sleep(2 * time.Minute)
	srv.mu.Lock()
	want, newest := srv.stateAt(srv.rev), srv.rev
	srv.mu.Unlock()
	got := cs.Objects()
	stop()

	var failures []string
	srv.mu.Lock()
	defer srv.mu.Unlock()
	failures = append(failures, head(srv.broken, 3)...)
	store.mu.Lock()
	failures = append(failures, head(store.backward, 3)...)
	store.mu.Unlock()
	for _, target := range cs.Targets() {
		if mustInt(target) < started {
			failures = append(failures, fmt.Sprintf("the catch-up's target %s is older than the server at the start (%d)", target, started))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		failures = append(failures, fmt.Sprintf("not settled 2 minutes after the last write: the store holds %v, the server %v at %d", got, want, newest))
	}
	if len(failures) > 0 {
		t.Errorf("seed %d %+v (stored version %d, newest at the start %d):\n%s\nfirst lists:\n%s",
			seed, cfg, stored, started, strings.Join(failures, "\n"), strings.Join(head(srv.lists, 8), "\n"))
	}
}
