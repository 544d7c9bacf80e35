package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/listrules"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"

	"github.com/boltinformer/boltinformer/reflector"
)

// upod is a Pod of namespace ns with a UID.
func upod(ns, name, uid, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

// fakeStore is a Store that records every write as a string
// ("update ns/b@5", "delete tombstone:ns/c@3", "begin …", "end@10") and
// keeps key → object.
type fakeStore struct {
	mu    sync.Mutex
	objs  map[string]*v1.Pod
	calls []string
	// unsupported makes Begin refuse.
	unsupported bool
	// failWrite, if set, is the key whose writes fail.
	failWrite string
}

var _ Store = (*fakeStore)(nil)

func newFakeStore(pods ...*v1.Pod) *fakeStore {
	s := &fakeStore{objs: map[string]*v1.Pod{}}
	for _, p := range pods {
		s.objs[p.Namespace+"/"+p.Name] = p
	}
	return s
}

func (s *fakeStore) record(c string) { s.calls = append(s.calls, c) }

func (s *fakeStore) write(verb string, obj interface{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := obj.(*v1.Pod)
	key := p.Namespace + "/" + p.Name
	if key == s.failWrite {
		s.record(verb + " " + key + " failed")
		return errors.New("write failed")
	}
	if verb == "delete" {
		delete(s.objs, key)
	} else {
		s.objs[key] = p
	}
	s.record(verb + " " + key + "@" + p.ResourceVersion)
	return nil
}

func (s *fakeStore) Add(obj interface{}) error    { return s.write("add", obj) }
func (s *fakeStore) Update(obj interface{}) error { return s.write("update", obj) }
func (s *fakeStore) Delete(obj interface{}) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.objs, d.Key)
		rv := "<nil>"
		if p, ok := d.Obj.(*v1.Pod); ok {
			rv = p.ResourceVersion
		}
		s.record("delete tombstone:" + d.Key + "@" + rv)
		return nil
	}
	return s.write("delete", obj)
}

func (s *fakeStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = map[string]*v1.Pod{}
	for _, obj := range list {
		p := obj.(*v1.Pod)
		s.objs[p.Namespace+"/"+p.Name] = p
	}
	s.record(fmt.Sprintf("replace %d@%s", len(list), rv))
	return nil
}

func (s *fakeStore) Resync() error { return nil }

func (s *fakeStore) Bookmark(rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("bookmark@" + rv)
	return nil
}

func (s *fakeStore) Begin(_ context.Context, diff func(map[string]Version) (Plan, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsupported {
		return ErrUnsupported
	}
	stored := map[string]Version{}
	for k, p := range s.objs {
		stored[k] = Version{UID: p.UID, ResourceVersion: p.ResourceVersion}
	}
	plan, err := diff(stored)
	if err != nil {
		return err
	}
	s.record(fmt.Sprintf("begin deleted=%v unchanged=%v", plan.Deleted, plan.Unchanged))
	for _, k := range plan.Deleted {
		s.record("delete tombstone:" + k + "@" + s.objs[k].ResourceVersion)
		delete(s.objs, k)
	}
	return nil
}

func (s *fakeStore) Stored(key string) (interface{}, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.objs[key]
	return p, ok, nil
}

func (s *fakeStore) End(rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("end@" + rv)
	return nil
}

func (s *fakeStore) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// callsAfterBegin returns the calls after the "begin" one.
func (s *fakeStore) callsAfterBegin() []string {
	calls := s.Calls()
	for i, c := range calls {
		if strings.HasPrefix(c, "begin") {
			return calls[i+1:]
		}
	}
	return nil
}

func (s *fakeStore) waitFor(t *testing.T, call string) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("store call %q", call), func() bool {
		return slices.Contains(s.Calls(), call)
	})
}

// fakeLister scripts a Lister's two required functions. meta answers metadata list pages;
// objects answers ListObjects (namespace and name "" for all).
type fakeLister struct {
	meta    func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	objects func(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error)

	mu       sync.Mutex
	metaOpts []metav1.ListOptions
	fetches  []string // "ns/name@rv" of each ListObjects call, "ns/*" for a namespace, "*" for all
}

// checkRecoveryList fails a list a recovery must not make. Its store holds
// the collection at some version, so every list must be a consistent read
// or not older than a version (listrules.Relist): never "0", never exact.
func checkRecoveryList(opts metav1.ListOptions) error {
	s, err := listrules.Of(opts)
	switch {
	case err != nil:
		return err
	case s == listrules.Consistent, s == listrules.NotOlderThan, s == listrules.Continue:
		return nil
	}
	return fmt.Errorf("a recovery's list %s (resourceVersion %q, resourceVersionMatch %q, limit %d) may be older than its store", s, opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit)
}

func (l *fakeLister) ListMetadata(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if err := checkRecoveryList(opts); err != nil {
		return nil, err
	}
	l.mu.Lock()
	n := len(l.metaOpts)
	l.metaOpts = append(l.metaOpts, opts)
	l.mu.Unlock()
	return l.meta(n, opts)
}

func (l *fakeLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	what := "*"
	switch {
	case name != "":
		what = namespace + "/" + name
	case namespace != "":
		what = namespace + "/*"
	}
	if opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan && opts.Continue == "" {
		return nil, fmt.Errorf("fetch %s without NotOlderThan: %+v", what, opts)
	}
	if err := checkRecoveryList(opts); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.fetches = append(l.fetches, what+"@"+opts.ResourceVersion)
	l.mu.Unlock()
	return l.objects(ctx, namespace, name, opts)
}

// lister is the Lister of fakeLister's methods.
func (l *fakeLister) lister() *Lister {
	lr := &Lister{}
	lr.ListMetadata = l.ListMetadata
	lr.ListObjects = l.ListObjects
	return lr
}

func (l *fakeLister) MetaOpts() []metav1.ListOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.metaOpts)
}

func (l *fakeLister) Fetches() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fetches)
}

// metaList is a metadata list at rv of pods.
func metaList(rv string, pods ...*v1.Pod) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, p := range pods {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
	}
	return l
}

// server answers ListObjects from pods, at list resourceVersion rv.
func server(rv string, pods ...*v1.Pod) func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
	return func(_ context.Context, ns, name string, _ metav1.ListOptions) (runtime.Object, error) {
		var out []*v1.Pod
		for _, p := range pods {
			if (ns == "" || p.Namespace == ns) && (name == "" || p.Name == name) {
				out = append(out, p)
			}
		}
		return reflectortest.PodList(rv, out...), nil
	}
}

// recoveryObserver is a RecordingObserver that also records Recovered.
type recoveryObserver struct {
	reflectortest.RecordingObserver[reflector.StartCause]
	mu        sync.Mutex
	recovered []Stats
}

func (o *recoveryObserver) Recovered(c reflector.StartCause, rv string, stats Stats) {
	o.Add(fmt.Sprintf("recovered %s %s", c, rv))
	o.mu.Lock()
	o.recovered = append(o.recovered, stats)
	o.mu.Unlock()
}

func (o *recoveryObserver) Stats() []Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.recovered)
}

type recoveryHarness struct {
	t      *testing.T
	store  *fakeStore
	lister *fakeLister
	lw     *reflectortest.ScriptedLW
	obs    *recoveryObserver
	errs   *reflectortest.ErrorRecorder
	r      *reflector.Reflector
	stop   func()
}

// waitFailedThenEnded waits for a recovery to fail with an reflector.ErrList naming
// what, calls heal, and waits for a later recovery to reach its end.
func (h *recoveryHarness) waitFailedThenEnded(what string, heal func()) {
	h.t.Helper()
	poll.Until(h.t, 5*time.Second, "a failed recovery", func() bool {
		return slices.ContainsFunc(h.errs.Errors(), func(err error) bool {
			return errors.Is(err, reflector.ErrList) && strings.Contains(err.Error(), what)
		})
	})
	heal()
	poll.Until(h.t, 5*time.Second, "a recovery's end", func() bool {
		return slices.ContainsFunc(h.store.Calls(), func(c string) bool { return strings.HasPrefix(c, "end@") })
	})
}

// startRecovery runs a reflector that must list from listFrom (as for a
// store that owes a list), with recoveries through lister into store;
// mutate adjusts the Options. Full lists are test errors unless the test
// scripts lw.List.
func startRecovery(t *testing.T, store *fakeStore, lister *fakeLister, listFrom string, mutate func(*testOptions, *reflectortest.ScriptedLW)) *recoveryHarness {
	h := &recoveryHarness{t: t, store: store, lister: lister, lw: &reflectortest.ScriptedLW{T: t}, obs: &recoveryObserver{}, errs: &reflectortest.ErrorRecorder{}}
	opts := testOptions{Options: reflector.Options{
		ExpectedType:      &v1.Pod{},
		InitialBackoff:    time.Millisecond,
		MaxBackoff:        4 * time.Millisecond,
		Observer:          h.obs,
		WatchErrorHandler: h.errs.Handle,
		ListFrom:          listFrom,
	},
		// One request at a time, one object per request: deterministic.
		Recovery: &testRecovery{Lister: lister, Workers: 1, FullListFraction: 2},
	}
	if mutate != nil {
		mutate(&opts, h.lw)
	}
	h.r = newReflector(h.lw.ListWatch(), store, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Run(ctx)
	}()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return within 5s of cancel")
			}
			assertNoReflectorGoroutines(t)
		})
	}
	t.Cleanup(h.stop)
	return h
}

// The diff classes each get their treatment. An unchanged object is not
// fetched nor written, and is handed to the store as Unchanged. A gone one
// gets a tombstone. One replaced by another UID gets a tombstone, then is
// fetched and added. A changed one is fetched and updated, and a new one
// fetched and added. The metadata list is at the stored resourceVersion with
// NotOlderThan, paged. The fetches follow the watch's opening, at least as
// new as the list. Once everything is fetched, the store is told the
// recovery ended at the list's resourceVersion.
func TestRecoveryDiffClasses(t *testing.T) {
	store := newFakeStore(
		upod("ns", "a", "ua", "1"),  // unchanged
		upod("ns", "b", "ub", "2"),  // changed
		upod("ns", "c", "uc", "3"),  // gone
		upod("ns", "d", "ud1", "4"), // deleted and recreated: another UID
	)
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "d", "ud2", "6"), upod("ns", "e", "ue", "7")}
	watchOpened := make(chan struct{})
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", onServer...), nil
		},
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
			select {
			case <-watchOpened:
			default:
				t.Errorf("fetch of %s/%s before the watch opened", ns, name)
			}
			return server("10", onServer...)(ctx, ns, name, opts)
		},
	}
	h := startRecovery(t, store, lister, "4", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		lw.SignalWatch(watchOpened)
	})
	store.waitFor(t, "end@10")
	h.stop()

	reflectortest.Equal(t, "metadata list options", lister.MetaOpts(), []metav1.ListOptions{{
		ResourceVersion: "4", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: recoveryPageSize,
	}})
	reflectortest.Equal(t, "fetches", lister.Fetches(), []string{"ns/b@10", "ns/d@10", "ns/e@10"})
	reflectortest.Equal(t, "store calls", store.Calls(), []string{
		"begin deleted=[ns/c ns/d] unchanged=[ns/a]",
		"delete tombstone:ns/c@3", "delete tombstone:ns/d@4",
		"update ns/b@5", "add ns/d@6", "add ns/e@7",
		"end@10",
	})
	reflectortest.Equal(t, "watches", h.lw.WatchRVs()[:1], []string{"10"})
	if n := len(h.lw.ListOpts()); n != 0 {
		t.Errorf("%d full lists, want none", n)
	}
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed relist-error 10 items=4 pages=1"})
	stats := h.obs.Stats()
	if len(stats) != 1 {
		t.Fatalf("recovered %d times, want once", len(stats))
	}
	s := stats[0]
	s.Duration, s.ListDuration = 0, 0
	reflectortest.Equal(t, "stats", s, Stats{Listed: 4, Pages: 1, Unchanged: 1, Deleted: 2, Fetch: 3, Requests: 3, Fetched: 3, Decoded: 3})
	h.errs.CheckNone(t)
}

// A 410 on the resumed watch starts a recovery from the resumed
// resourceVersion (cause relist-expired); the metadata list is paged with
// continue tokens, which carry no resourceVersion.
func TestRecoveryAfterExpiredWatch(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			if n == 0 {
				l := metaList("9", upod("ns", "a", "ua", "1"))
				l.Continue = "next"
				return l, nil
			}
			return metaList("9", upod("ns", "b", "ub", "8")), nil
		},
		objects: server("9", upod("ns", "b", "ub", "8")),
	}
	h := startRecovery(t, store, lister, "", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		o.ResumeResourceVersion = "2"
		lw.Watch = func(n int, opts metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if n == 0 {
				w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
			}
			return w, nil
		}
	})
	store.waitFor(t, "end@9")
	h.stop()
	reflectortest.Equal(t, "metadata list options", lister.MetaOpts(), []metav1.ListOptions{
		{ResourceVersion: "2", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: recoveryPageSize},
		{Continue: "next", Limit: recoveryPageSize},
	})
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/b@8", "end@9"})
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 2", "listed relist-expired 9 items=2 pages=2"})
	reflectortest.Equal(t, "watches", h.lw.WatchRVs()[:2], []string{"2", "9"})
}

// A warm start whose first watch finds the stored version expired
// recovers at once, as a cold start lists at once. It does not wait for
// Run's backoff. Here that is an hour, so the test would time out waiting.
func TestRecoveryAfterExpiredResumeWithoutBackoff(t *testing.T) {
	for _, inStream := range []bool{false, true} {
		store := newFakeStore(upod("ns", "a", "ua", "1"))
		lister := &fakeLister{
			meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
				return metaList("9", upod("ns", "a", "ua", "1")), nil
			},
			objects: server("9"),
		}
		h := startRecovery(t, store, lister, "", func(o *testOptions, lw *reflectortest.ScriptedLW) {
			o.ResumeResourceVersion = "2"
			o.InitialBackoff, o.MaxBackoff = time.Hour, time.Hour
			lw.Watch = func(n int, opts metav1.ListOptions) (watch.Interface, error) {
				gone := apierrors.NewResourceExpired("too old resource version")
				if n > 0 {
					return watch.NewRaceFreeFake(), nil
				}
				if !inStream {
					return nil, gone
				}
				w := watch.NewRaceFreeFake()
				w.Error(&gone.ErrStatus)
				return w, nil
			}
		})
		store.waitFor(t, "end@9")
		h.stop()
		reflectortest.Equal(t, fmt.Sprintf("starts (410 in the stream: %t)", inStream), h.obs.Starts(), []string{"resumed 2", "listed relist-expired 9 items=1 pages=1"})
	}
}

// heldFetches makes ListObjects wait until release is closed, and tells
// started when it was called.
func heldFetches(objects func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error), started, release chan struct{}) func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
	var once sync.Once
	return func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
		once.Do(func() { close(started) })
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return objects(ctx, ns, name, opts)
	}
}

// A watch event for a key being fetched is applied as it comes. The fetch
// returns an older resourceVersion than the watch applied, and is dropped.
// So the store never sees the key go backwards. The event resolves the
// key, so the recovery ends at once.
func TestRecoveryWatchEventDuringFetch(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	started, release := make(chan struct{}), make(chan struct{})
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5")), nil
		},
		// Served from a lagging cache, older than what the watch brings.
		objects: heldFetches(server("11", upod("ns", "b", "ub", "11")), started, release),
	}
	h := startRecovery(t, store, lister, "2", nil)
	<-started
	h.lw.Watcher(t, 0).Modify(upod("ns", "b", "ub", "12"))
	store.waitFor(t, "end@12")
	close(release)
	h.stop() // waits for the fetch
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/b@12", "end@12"})
}

// A fetch may return a newer state than the watch has reached. It is
// applied, and the watch's older events for the key are dropped. The
// recovery ends only once the watch has passed the fetched
// resourceVersion, here by a bookmark. Until then the store is ahead of
// the watch for that key.
func TestRecoveryFetchAheadOfWatch(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")), nil
		},
		objects: server("15", upod("ns", "b", "ub", "15")),
	}
	h := startRecovery(t, store, lister, "3", nil)
	store.waitFor(t, "update ns/b@15")
	w := h.lw.Watcher(t, 0)
	w.Modify(upod("ns", "b", "ub", "13"))
	w.Modify(upod("ns", "c", "uc", "14"))
	store.waitFor(t, "update ns/c@14")
	if slices.ContainsFunc(store.Calls(), func(c string) bool { return strings.HasPrefix(c, "end") }) {
		t.Fatalf("recovery ended before the watch passed the fetched resourceVersion: %v", store.Calls())
	}
	w.Action(watch.Bookmark, upod("", "", "", "15"))
	store.waitFor(t, "end@15")
	w.Modify(upod("ns", "b", "ub", "16"))
	store.waitFor(t, "update ns/b@16")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/b@15", "update ns/c@14", "bookmark@15", "end@15", "update ns/b@16"})
	if s := h.obs.Stats(); len(s) != 1 || s[0].Skipped != 1 {
		t.Errorf("stats %+v, want 1 skipped (b@13)", s)
	}
}

// An object deleted after the metadata list is absent from its fetch. The
// recovery waits for the watch to deliver that deletion, which it passes
// on; a deletion of an object the store never held is not passed on.
func TestRecoveryFetchFindsNothing(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub", "2"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "b", "ub", "5"), upod("ns", "n", "un", "6")), nil
		},
		objects: server("14"), // both deleted since
	}
	h := startRecovery(t, store, lister, "2", nil)
	poll.Until(t, 5*time.Second, "both fetches", func() bool { return len(lister.Fetches()) == 2 })
	w := h.lw.Watcher(t, 0)
	w.Delete(upod("ns", "b", "ub", "13"))
	store.waitFor(t, "delete ns/b@13")
	if slices.ContainsFunc(store.Calls(), func(c string) bool { return strings.HasPrefix(c, "end") }) {
		t.Fatalf("recovery ended before the watch deleted ns/n: %v", store.Calls())
	}
	w.Delete(upod("ns", "n", "un", "14"))
	store.waitFor(t, "end@14")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"delete ns/b@13", "end@14"})
}

// A fetch that finds another UID under the key (deleted and recreated after
// the list) hands the store a tombstone of the stored object, then an add.
func TestRecoveryFetchFindsAnotherUID(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub1", "2"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "b", "ub1", "5")), nil
		},
		objects: server("12", upod("ns", "b", "ub2", "8")),
	}
	h := startRecovery(t, store, lister, "2", nil)
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"delete tombstone:ns/b@2", "add ns/b@8", "end@10"})
}

// A stored object newer than the metadata list is kept and not fetched. A
// recovery that did not finish left it. The watch's older events for it are
// dropped, and the recovery ends once the watch has reached it.
func TestRecoveryKeepsStoredAheadOfList(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub", "20"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "b", "ub", "5")), nil
		},
		objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
			return nil, errors.New("nothing is to be fetched")
		},
	}
	h := startRecovery(t, store, lister, "20", nil)
	w := h.lw.Watcher(t, 0)
	w.Modify(upod("ns", "b", "ub", "15"))
	w.Modify(upod("ns", "b", "ub", "20"))
	w.Modify(upod("ns", "b", "ub", "21"))
	store.waitFor(t, "update ns/b@21")
	h.stop()
	reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[] unchanged=[]", "end@20", "update ns/b@21"})
	reflectortest.Equal(t, "fetches", lister.Fetches(), []string(nil))
}

// A stored object newer than the metadata list and absent from it is kept
// too. A lagging apiserver may serve a list older than an object an earlier
// recovery fetched from another. The watch from the list's resourceVersion
// brings its deletion if there was one; the recovery ends once the watch
// has reached the stored object.
func TestRecoveryKeepsStoredAheadOfListAndAbsentFromIt(t *testing.T) {
	store := newFakeStore(
		upod("ns", "a", "ua", "1"),
		upod("ns", "b", "ub", "20"), // created at 15, fetched at 20
		upod("ns", "c", "uc", "18"), // created at 16, fetched at 18
	)
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "a", "ua", "1")), nil
		},
		objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
			return nil, errors.New("nothing is to be fetched")
		},
	}
	h := startRecovery(t, store, lister, "10", nil)
	w := h.lw.Watcher(t, 0)
	w.Add(upod("ns", "b", "ub", "15"))
	w.Add(upod("ns", "c", "uc", "16"))
	w.Modify(upod("ns", "c", "uc", "18"))
	w.Delete(upod("ns", "c", "uc", "19"))
	w.Modify(upod("ns", "b", "ub", "20"))
	w.Modify(upod("ns", "b", "ub", "21"))
	store.waitFor(t, "update ns/b@21")
	h.stop()
	reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[] unchanged=[ns/a]", "delete ns/c@19", "end@20", "update ns/b@21"})
	reflectortest.Equal(t, "fetches", lister.Fetches(), []string(nil))
	if s := h.obs.Stats(); len(s) != 1 || s[0].Ahead != 2 || s[0].Deleted != 0 {
		t.Errorf("stats %+v, want 2 ahead and none deleted", s)
	}
}

// Where most of the collection changed, the collection is listed in one
// request; otherwise each object is fetched alone. Objects the list returns
// that were not to be fetched are left to the watch.
func TestRecoveryListsTheCollectionOrObjects(t *testing.T) {
	stored := []*v1.Pod{upod("x", "a", "uxa", "1"), upod("x", "b", "uxb", "2"), upod("y", "c", "uyc", "3"), upod("z", "d", "uzd", "4")}
	listed := []*v1.Pod{upod("x", "a", "uxa", "5"), upod("x", "b", "uxb", "6"), upod("y", "c", "uyc", "7"), upod("z", "d", "uzd", "4")}
	onServer := []*v1.Pod{upod("x", "a", "uxa", "5"), upod("x", "b", "uxb", "6"), upod("x", "new", "uxn", "9"), upod("y", "c", "uyc", "7"), upod("z", "d", "uzd", "4")}
	for _, tc := range []struct {
		name    string
		cfg     testRecovery
		fetches []string
	}{
		{"collection", testRecovery{FullListFraction: 0.75}, []string{"*@10"}},
		{"objects", testRecovery{FullListFraction: 2}, []string{"x/a@10", "x/b@10", "y/c@10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(stored...)
			lister := &fakeLister{
				meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					return metaList("10", listed...), nil
				},
				objects: server("10", onServer...),
			}
			h := startRecovery(t, store, lister, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				cfg := tc.cfg
				cfg.Lister, cfg.Workers = lister, 1
				o.Recovery = &cfg
			})
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "fetches", lister.Fetches(), tc.fetches)
			after := store.callsAfterBegin()
			sort.Strings(after)
			reflectortest.Equal(t, "store calls after begin", after, []string{"end@10", "update x/a@5", "update x/b@6", "update y/c@7"})
		})
	}
}

// Where the server cannot list metadata (406), or resourceVersions are not
// integers, or the store cannot recover, the reflector lists in full.
func TestRecoveryFallsBackToAFullList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		meta  func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
		store func(*fakeStore)
	}{
		{"not acceptable", func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return nil, apierrors.NewGenericServerResponse(406, "GET", schema.GroupResource{Resource: "pods"}, "", "", 0, false)
		}, nil},
		{"opaque resourceVersions", func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("abc", upod("ns", "a", "ua", "x1")), nil
		}, nil},
		{"store", func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "a", "ua", "1")), nil
		}, func(s *fakeStore) { s.unsupported = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(upod("ns", "a", "ua", "1"))
			if tc.store != nil {
				tc.store(store)
			}
			lister := &fakeLister{meta: tc.meta}
			h := startRecovery(t, store, lister, "1", func(_ *testOptions, lw *reflectortest.ScriptedLW) {
				lw.List = func(int, metav1.ListOptions) (runtime.Object, error) {
					return reflectortest.PodList("10", upod("ns", "a", "ua", "1")), nil
				}
			})
			store.waitFor(t, "replace 1@10")
			h.stop()
			reflectortest.Equal(t, "full lists", h.lw.ListRVs(), []string{"1"})
		})
	}
}

// A fetch that keeps failing fails the recovery: its watch ends, the error
// is returned, and Run recovers again after backoff, from the resourceVersion
// the watch reached. The store is not told the recovery ended until one
// did.
func TestRecoveryRetriedAfterFailedFetches(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub", "2"))
	lister, heal := failingFetches()
	h := startRecovery(t, store, lister, "2", nil)
	h.waitFailedThenEnded("fetching changed objects: ", heal)
	h.stop()
	if n := len(lister.MetaOpts()); n < 2 {
		t.Errorf("%d metadata lists, want a second recovery", n)
	}
	if got := lister.Fetches(); len(got) < fetchAttempts+1 {
		t.Errorf("fetches %v, want %d failed attempts and a good one", got, fetchAttempts)
	}
	calls := store.Calls()
	if n := len(slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "update") })); n != 1 {
		t.Errorf("store calls %v: want exactly one update of ns/b", calls)
	}
}

// Without a Store, or without a lister, the reflector lists in full.
func TestRecoveryNeedsStoreAndLister(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) {
		return reflectortest.PodList("10", reflectortest.Pod("a", "1")), nil
	}}
	lister := &fakeLister{meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		t.Error("metadata list without a Store")
		return nil, errors.New("no")
	}}
	h := newHarness(t, lw.ListWatch(), func(o *testOptions) {
		o.ListFrom = "3"
		o.Recovery = &testRecovery{Lister: lister}
	})
	stop := h.run()
	poll.Until(t, 5*time.Second, "full list", func() bool { return slices.Contains(h.store.Calls(), "replace 1@10") })
	stop()
}

// One object per request, unless most of the collection changed or the
// requests would not fit a rate-limited lister's budget: then one list of
// the collection.
func TestRecoveryFetchesOrListsTheCollection(t *testing.T) {
	cfg := testRecovery{FullListFraction: 0.25}.config()
	for _, tc := range []struct {
		name          string
		budget, fetch int
		full          bool
	}{
		{"a few changed", 0, 14, false},
		{"a quarter changed", 0, 55, true},
		{"within the budget", 14, 14, false},
		{"over the budget", 13, 14, true},
	} {
		if got := listsInFull(&cfg, tc.budget, tc.fetch, 220); got != tc.full {
			t.Errorf("%s: listsInFull = %v, want %v", tc.name, got, tc.full)
		}
	}
}

// A recovery cannot end without its watch. RBAC without the watch verb
// refuses the watch. The reflector then lists in full until a watch opens,
// as client-go lists while its watches fail. Then it recovers again.
func TestRecoveryWithoutAWatch(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	lister := &fakeLister{
		meta: func(n int, _ metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList(fmt.Sprint(10+n), upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5")), nil
		},
		objects: server("10", upod("ns", "b", "ub", "5")),
	}
	var mu sync.Mutex
	refuse := true
	h := startRecovery(t, store, lister, "2", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		lw.List = func(int, metav1.ListOptions) (runtime.Object, error) {
			return reflectortest.PodList("20", upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5")), nil
		}
		lw.Watch = func(int, metav1.ListOptions) (watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			if refuse {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no watch verb"))
			}
			return watch.NewRaceFreeFake(), nil
		}
	})
	store.waitFor(t, "replace 2@20")
	if n := len(lister.MetaOpts()); n != 1 {
		t.Errorf("%d metadata lists before the full list, want 1", n)
	}
	mu.Lock()
	refuse = false
	n := len(h.lw.WatchOpts()) // the watches from here on are accepted
	mu.Unlock()
	// A watch opens; the next relist (here after a 410) recovers again.
	w := h.lw.Watcher(t, n)
	w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	poll.Until(t, 5*time.Second, "a second recovery", func() bool { return len(lister.MetaOpts()) == 2 })
	store.waitFor(t, "end@11")
	h.stop()
}

// A recovery with nothing to fetch ends before its watch opens. That watch
// ending later with a 410 leads to another recovery, not a full list. The
// recovery that ended needed no watch. Otherwise an apiserver's restart
// would make reflectors that started warm relist in full.
func TestRecoveryWithNothingToFetchThenExpired(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			if n == 0 {
				return metaList("5", upod("ns", "a", "ua", "1")), nil // unchanged: nothing to fetch
			}
			return metaList("9", upod("ns", "a", "ua", "8")), nil
		},
		objects: server("9", upod("ns", "a", "ua", "8")),
	}
	h := startRecovery(t, store, lister, "1", func(o *testOptions, lw *reflectortest.ScriptedLW) {
		lw.Watch = func(n int, opts metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if n == 0 {
				w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
			}
			return w, nil
		}
	})
	store.waitFor(t, "end@9")
	h.stop()
	if n := len(h.lw.ListOpts()); n != 0 {
		t.Errorf("%d full lists after a recovery that fetched nothing, want none (another recovery)", n)
	}
	if got := len(h.obs.Stats()); got != 2 {
		t.Errorf("recovered %d times, want twice", got)
	}
}

// Hooks.Started is called as each recovery begins, and its function once
// that recovery has ended. After a failure, the function is called before
// the next recovery begins. After a success, it is called after the store
// was told the recovery ended.
func TestRecoveryStartedAndEnded(t *testing.T) {
	store := newFakeStore(upod("ns", "b", "ub", "2"))
	lister, heal := failingFetches()
	mark := func(c string) {
		store.mu.Lock()
		defer store.mu.Unlock()
		store.record(c)
	}
	h := startRecovery(t, store, lister, "2", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.Started = func() func() {
			mark("started")
			return func() { mark("ended") }
		}
	})
	h.waitFailedThenEnded("fetching changed objects: ", heal)
	store.waitFor(t, "ended") // the one after end@N, if the first is not it
	poll.Until(t, 5*time.Second, "the last recovery's end", func() bool {
		calls := store.Calls()
		return calls[len(calls)-1] == "ended"
	})
	h.stop()
	var seq []string
	for _, c := range store.Calls() {
		switch {
		case c == "started", c == "ended", strings.HasPrefix(c, "end@"):
			seq = append(seq, strings.TrimRight(c, "0123456789"))
		}
	}
	// Failed recoveries (one or more), each ended before the next began,
	// then the one that ended the recovery.
	want := []string{}
	for range (len(seq) - 3) / 2 {
		want = append(want, "started", "ended")
	}
	want = append(want, "started", "end@", "ended")
	reflectortest.Equal(t, "hook calls", seq, want)
	if len(seq) < 5 {
		t.Errorf("hook calls %v: want a failed recovery before the one that ended", seq)
	}
}

// failingFetches is a lister of ns/b, changed to resourceVersion 5, whose
// fetches fail until heal is called.
func failingFetches() (lister *fakeLister, heal func()) {
	var mu sync.Mutex
	failing := true
	lister = &fakeLister{
		meta: func(n int, _ metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList(fmt.Sprint(10+n), upod("ns", "b", "ub", "5")), nil
		},
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
			}
			return server("20", upod("ns", "b", "ub", "5"))(ctx, ns, name, opts)
		},
	}
	return lister, func() {
		mu.Lock()
		failing = false
		mu.Unlock()
	}
}

// A recovery's list is a reflector's catch-up target only if it is a
// consistent read. Its own metadata list asks for data not older than the
// stored version. A watch cache behind etcd serves that at its position,
// which may be older than the server at the start. So it is no target. The
// list Hooks.Listed gives is one. It is the informer's proof list, a
// consistent read taken after the start.
func TestRecoveryListIsACatchUpTargetOnlyIfConsistent(t *testing.T) {
	for _, given := range []bool{false, true} {
		t.Run(fmt.Sprintf("given %v", given), func(t *testing.T) {
			store := newFakeStore(upod("ns", "a", "ua", "1"))
			lister := &fakeLister{
				meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					return metaList("9", upod("ns", "a", "ua", "1")), nil
				},
				objects: server("9"),
			}
			var mu sync.Mutex
			var targets []string
			h := startRecovery(t, store, lister, "", func(o *testOptions, lw *reflectortest.ScriptedLW) {
				o.ResumeResourceVersion = "2"
				o.CatchUp = &reflector.CatchUp{Done: make(chan struct{}), Target: func(rv string) {
					mu.Lock()
					defer mu.Unlock()
					targets = append(targets, rv)
				}}
				if given {
					o.Recovery.Listed = func(context.Context) *Listing {
						return &Listing{ResourceVersion: "9", Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
					}
				}
				// No consistent read succeeds: only a list can be the target.
				lw.List = func(int, metav1.ListOptions) (runtime.Object, error) {
					return nil, errors.New("connection reset by peer")
				}
				lw.Watch = func(n int, opts metav1.ListOptions) (watch.Interface, error) {
					if n == 0 {
						return nil, apierrors.NewResourceExpired("too old resource version")
					}
					return watch.NewRaceFreeFake(), nil
				}
			})
			store.waitFor(t, "end@9")
			h.stop()
			mu.Lock()
			defer mu.Unlock()
			if given {
				reflectortest.Equal(t, "targets", targets, []string{"9"})
				reflectortest.Equal(t, "metadata lists", len(lister.MetaOpts()), 0)
			} else {
				reflectortest.Equal(t, "targets", targets, []string(nil))
			}
		})
	}
}
