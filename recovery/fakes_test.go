package recovery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

func pod(name, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func podList(rv string, pods ...*v1.Pod) *v1.PodList {
	l := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

// recStore is a Store that records every call and tracks name → rv.
type recStore struct {
	mu        sync.Mutex
	calls     []string
	objs      map[string]string
	resyncs   int
	resyncErr error // returned by the next Resync, then cleared
}

var _ reflector.Store = (*recStore)(nil)

func newRecStore() *recStore { return &recStore{objs: map[string]string{}} }

func nameRV(obj interface{}) (string, string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return m.GetName(), m.GetResourceVersion()
}

func (s *recStore) Add(obj interface{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, rv := nameRV(obj)
	s.objs[name] = rv
	s.calls = append(s.calls, "add "+name+"@"+rv)
	return nil
}

func (s *recStore) Update(obj interface{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, rv := nameRV(obj)
	s.objs[name] = rv
	s.calls = append(s.calls, "update "+name+"@"+rv)
	return nil
}

func (s *recStore) Delete(obj interface{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, rv := nameRV(obj)
	delete(s.objs, name)
	s.calls = append(s.calls, "delete "+name+"@"+rv)
	return nil
}

func (s *recStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = map[string]string{}
	for _, obj := range list {
		name, objRV := nameRV(obj)
		s.objs[name] = objRV
	}
	s.calls = append(s.calls, fmt.Sprintf("replace %d@%s", len(list), rv))
	return nil
}

func (s *recStore) Resync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncs++
	err := s.resyncErr
	s.resyncErr = nil
	return err
}

func (s *recStore) Bookmark(rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "bookmark@"+rv)
	return nil
}

func (s *recStore) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *recStore) Objects() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.objs))
	for k, v := range s.objs {
		out[k] = v
	}
	return out
}

func (s *recStore) Resyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resyncs
}

func (s *recStore) SetResyncErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncErr = err
}

// fakeLW scripts a cache.ListWatch and records every request. list == nil
// makes any List call a test error; watch == nil answers every Watch with a
// fresh RaceFreeFakeWatcher. Every RaceFreeFakeWatcher handed out is kept,
// by call index, for the test to drive.
type fakeLW struct {
	t     *testing.T
	list  func(n int, opts metav1.ListOptions) (runtime.Object, error)
	watch func(n int, opts metav1.ListOptions) (watch.Interface, error)

	mu        sync.Mutex
	listOpts  []metav1.ListOptions
	watchOpts []metav1.ListOptions
	watchers  map[int]*watch.RaceFreeFakeWatcher
	// requests are all requests in order: "list@rv", "read@" (a limit=1
	// list at ""), "watch@rv".
	requests []string
}

func (f *fakeLW) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			n := len(f.listOpts)
			f.listOpts = append(f.listOpts, opts)
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				f.requests = append(f.requests, "read@")
			} else {
				f.requests = append(f.requests, "list@"+opts.ResourceVersion)
			}
			f.mu.Unlock()
			if f.list == nil {
				f.t.Errorf("unexpected List(%+v)", opts)
				return nil, errors.New("unexpected list")
			}
			return f.list(n, opts)
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			n := len(f.watchOpts)
			f.watchOpts = append(f.watchOpts, opts)
			f.requests = append(f.requests, "watch@"+opts.ResourceVersion)
			f.mu.Unlock()
			var w watch.Interface = watch.NewRaceFreeFake()
			var err error
			if f.watch != nil {
				w, err = f.watch(n, opts)
			}
			if rf, ok := w.(*watch.RaceFreeFakeWatcher); ok && err == nil {
				f.mu.Lock()
				if f.watchers == nil {
					f.watchers = map[int]*watch.RaceFreeFakeWatcher{}
				}
				f.watchers[n] = rf
				f.mu.Unlock()
			}
			return w, err
		},
	}
}

// Requests returns every request so far in order, without the limit=1
// reads at "" (see requests).
func (f *fakeLW) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if r != "read@" {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeLW) ListOpts() []metav1.ListOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.listOpts)
}

func (f *fakeLW) ListRVs() []string {
	var rvs []string
	for _, o := range f.ListOpts() {
		rvs = append(rvs, o.ResourceVersion)
	}
	return rvs
}

func (f *fakeLW) WatchOpts() []metav1.ListOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.watchOpts)
}

func (f *fakeLW) WatchRVs() []string {
	var rvs []string
	for _, o := range f.WatchOpts() {
		rvs = append(rvs, o.ResourceVersion)
	}
	return rvs
}

// watcher waits for the watcher handed out by the n-th Watch call.
func (f *fakeLW) watcher(t *testing.T, n int) *watch.RaceFreeFakeWatcher {
	t.Helper()
	var w *watch.RaceFreeFakeWatcher
	poll.Until(t, 5*time.Second, fmt.Sprintf("watch #%d", n), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		w = f.watchers[n]
		return w != nil
	})
	return w
}

// signalWatch makes f's watches quiet fakes and closes opened as the
// first is made.
func (f *fakeLW) signalWatch(opened chan struct{}) {
	f.watch = func(n int, _ metav1.ListOptions) (watch.Interface, error) {
		if n == 0 {
			close(opened)
		}
		return watch.NewRaceFreeFake(), nil
	}
}

// recObserver records Observer calls as strings.
type recObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *recObserver) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, s)
}

func (o *recObserver) Resumed(rv string) { o.add("resumed " + rv) }
func (o *recObserver) Listed(c reflector.StartCause, rv string, items, pages int) {
	o.add(fmt.Sprintf("listed %s %s items=%d pages=%d", c, rv, items, pages))
}
func (o *recObserver) WatchStarted(rv string) { o.add("watch " + rv) }
func (o *recObserver) WatchEnded(err error) {
	if err == nil {
		o.add("ended ok")
		return
	}
	o.add("ended error")
}

func (o *recObserver) Events() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// Starts returns only the Resumed and Listed calls: the StartCause history.
func (o *recObserver) Starts() []string {
	var out []string
	for _, e := range o.Events() {
		if e[:6] == "resume" || e[:6] == "listed" {
			out = append(out, e)
		}
	}
	return out
}

type errRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (e *errRecorder) handle(_ context.Context, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errRecorder) Errors() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.errs)
}

type harness struct {
	t     *testing.T
	store *recStore
	obs   *recObserver
	errs  *errRecorder
	r     *reflector.Reflector
}

// newHarness builds a Reflector for *v1.Pod with millisecond backoffs, a
// recording Store, Observer and error handler; mutate adjusts the Options.
func newHarness(t *testing.T, lw cache.ListerWatcher, mutate func(*testOptions)) *harness {
	h := &harness{t: t, store: newRecStore(), obs: &recObserver{}, errs: &errRecorder{}}
	opts := testOptions{Options: reflector.Options{
		ExpectedType:      &v1.Pod{},
		InitialBackoff:    time.Millisecond,
		MaxBackoff:        4 * time.Millisecond,
		Observer:          h.obs,
		WatchErrorHandler: h.errs.handle,
	}}
	if mutate != nil {
		mutate(&opts)
	}
	h.r = newReflector(lw, h.store, opts)
	return h
}

// run starts Run on a goroutine. The returned stop (also registered as a
// cleanup) cancels it, requires it to return within a second, and checks
// that no reflector goroutine is left.
func (h *harness) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(time.Second):
				h.t.Fatal("Run did not return within 1s of cancel")
			}
			assertNoReflectorGoroutines(h.t)
		})
	}
	h.t.Cleanup(stop)
	return stop
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func noErrors(t *testing.T, h *harness) {
	t.Helper()
	if errs := h.errs.Errors(); len(errs) > 0 {
		t.Errorf("unexpected errors reported: %v", errs)
	}
}

// testOptions are a reflector's options with the recovery the tests set up.
type testOptions struct {
	reflector.Options
	Recovery *testRecovery
}

// testRecovery is an Options with its tuning and hooks, as tests set them.
type testRecovery struct {
	Lister                              testLister
	Workers                             int
	FullListFraction, FirstPageFraction float64
	MaxFetchRequests                    int
	Listed                              func(ctx context.Context) *Listing
	ListInFull, OpaqueVersions          bool
	Started                             func() (ended func())
}

// testLister is a scripted lister: lister returns its Lister, whose
// fields are the methods it has and no others.
type testLister interface{ lister() *Lister }

// config completes c as New does.
func (c testRecovery) config() config {
	var lister *Lister
	if c.Lister != nil {
		lister = c.Lister.lister()
	}
	return newConfig(&Options{Lister: lister, Workers: c.Workers, ListInFull: c.ListInFull, OpaqueVersions: c.OpaqueVersions,
		Tuning: Tuning{FullListFraction: c.FullListFraction, FirstPageFraction: c.FirstPageFraction, MaxFetchRequests: c.MaxFetchRequests}})
}

// newReflector builds a reflector that recovers through o.Recovery, if
// set and store is a Store.
func newReflector(lw cache.ListerWatcher, store reflector.Store, o testOptions) *reflector.Reflector {
	opts := o.Options
	rs, ok := store.(Store)
	if c := o.Recovery; c != nil && c.Lister != nil && ok {
		r := New(&Options{Lister: c.Lister.lister()}, rs, Hooks{Listed: c.Listed, Started: c.Started})
		r.cfg = c.config()
		opts.Relister = r
	}
	return reflector.New(lw, store, opts)
}
