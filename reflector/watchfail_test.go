package reflector

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// Watches that fail (other than with an expired or too-large
// resourceVersion) are retried once from where the store is; the second
// failure in a row relists there, as client-go relists after the first.
// Connection refused and 429 are retried without limit, as in client-go.
func TestWatchFailureRetriedOnceThenRelisted(t *testing.T) {
	for _, tc := range watchFailures() {
		t.Run(tc.name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{
				T: t,
				List: func(int, metav1.ListOptions) (runtime.Object, error) {
					return reflectortest.PodList("160", reflectortest.Pod("a", "150")), nil
				},
				Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
					w := watch.NewRaceFreeFake()
					if n < 2 {
						return tc.fail(w)
					}
					return w, nil
				},
			}
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "100" })
			stop := h.run()
			lw.Watcher(t, 2)
			stop()

			if tc.retriable {
				reflectortest.Equal(t, "list calls", len(lw.ListOpts()), 0)
				reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "100", "100"})
				reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100"})
			} else {
				reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"100"})
				if opts := lw.ListOpts(); len(opts) > 0 {
					reflectortest.Equal(t, "relist Limit (served from the watch cache)", opts[0].Limit, int64(0))
				}
				reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "100", "160"})
				reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100", "listed relist-error 160 items=1 pages=1"})
				reflectortest.Equal(t, "store", h.store.Objects(), map[string]string{"a": "150"})
			}
			errs := h.errs.Errors()
			if len(errs) != 2 {
				t.Fatalf("errors = %v, want the 2 failures", errs)
			}
			for _, err := range errs {
				if !errors.Is(err, ErrWatch) || !tc.cause(err) {
					t.Errorf("error %v: want ErrWatch wrapping the cause", err)
				}
			}
		})
	}
}

// A watch that delivered events before it failed worked: it ends a run of
// failures instead of adding to it, so failures around it do not relist.
func TestWatchThatDeliveredEventsEndsARunOfFailures(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("boom"))
	lw := &reflectortest.ScriptedLW{T: t, Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		switch n {
		case 0, 2:
			return nil, internal
		case 1:
			w.Modify(reflectortest.Pod("a", "120"))
			w.Error(&internal.ErrStatus)
		}
		return w, nil
	}}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "100" })
	stop := h.run()
	lw.Watcher(t, 3)
	stop()
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "100", "120", "120"})
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100"})
}

// catchUpStore is a RecordingStore that plays the informer's part in CatchUp:
// it closes done once it has applied a resourceVersion at least the
// target handed to Target (resourceVersions compared as integers, as the
// informer compares them).
type catchUpStore struct {
	*reflectortest.RecordingStore
	done chan struct{}

	mu      sync.Mutex
	target  int64 // -1: not known yet
	applied int64
	targets []string
}

func newCatchUpStore() *catchUpStore {
	return &catchUpStore{RecordingStore: reflectortest.NewRecordingStore(), done: make(chan struct{}), target: -1}
}

func (s *catchUpStore) Target(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets = append(s.targets, rv)
	s.target = mustInt(rv)
	s.checkLocked()
}

func (s *catchUpStore) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

func (s *catchUpStore) note(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = max(s.applied, mustInt(rv))
	s.checkLocked()
}

func (s *catchUpStore) checkLocked() {
	if s.target < 0 || s.applied < s.target {
		return
	}
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

func mustInt(rv string) int64 {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

func (s *catchUpStore) noteObj(obj interface{}) {
	_, rv := reflectortest.NameRV(obj)
	s.note(rv)
}

// Each write is recorded, then its resourceVersion counts as applied.

func (s *catchUpStore) Add(obj interface{}) error {
	defer s.noteObj(obj)
	return s.RecordingStore.Add(obj)
}

func (s *catchUpStore) Update(obj interface{}) error {
	defer s.noteObj(obj)
	return s.RecordingStore.Update(obj)
}

func (s *catchUpStore) Delete(obj interface{}) error {
	defer s.noteObj(obj)
	return s.RecordingStore.Delete(obj)
}

func (s *catchUpStore) Bookmark(rv string) error {
	defer s.note(rv)
	return s.RecordingStore.Bookmark(rv)
}

func (s *catchUpStore) Replace(list []interface{}, rv string) error {
	defer s.note(rv)
	return s.RecordingStore.Replace(list, rv)
}

// newCatchUpHarness is newHarness for a reflector resuming at 100 that
// catches up into a catchUpStore; mutate adjusts the Options further.
func newCatchUpHarness(t *testing.T, lw *reflectortest.ScriptedLW, maxWatches int, mutate func(*Options)) (*harness, *catchUpStore) {
	store := newCatchUpStore()
	h := &harness{t: t, store: store.RecordingStore, obs: &reflectortest.RecordingObserver[StartCause]{}, errs: &reflectortest.ErrorRecorder{}}
	opts := Options{
		ExpectedType:          &v1.Pod{},
		ResumeResourceVersion: "100",
		Observer:              h.obs,
		WatchErrorHandler:     h.errs.Handle,
		CatchUp:               &CatchUp{Target: store.Target, Done: store.done, MaxWatches: maxWatches},
	}
	if mutate != nil {
		mutate(&opts)
	}
	h.r = New(lw.ListWatch(), store, opts)
	return h, store
}

// serverTimesOut answers every watch with a fake watcher that the "server"
// closes after the watch's timeoutSeconds, without sending anything.
func serverTimesOut(_ int, opts metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewRaceFreeFake()
	time.AfterFunc(time.Duration(*opts.TimeoutSeconds)*time.Second, w.Stop)
	return w, nil
}

// waitCaughtUp waits, in virtual time, up to a minute for done: the signal
// that catching up ended. A reflector that never gets there fails the test
// instead of hanging it.
func waitCaughtUp(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the store did not catch up within a (virtual) minute")
	}
}

// fullLists returns the resourceVersions of the lists other than the
// consistent limit=1 reads.
func fullLists(lw *reflectortest.ScriptedLW) []string {
	var rvs []string
	for _, o := range lw.ListOpts() {
		if o.Limit != 1 {
			rvs = append(rvs, o.ResourceVersion)
		}
	}
	return rvs
}

// A warm reflector catching up may find its watches failing. RBAC without
// the watch verb answers 403, and other start errors fail them too. Other
// watches end in an error or within a second. The reflector falls back to
// a list after the second failure in a row, where client-go lists after the
// first. The store has caught up once it applied that list. Connection
// refused and 429 are waited out, because a list could not be made either.
// client-go also retries them without relisting.
func TestCatchUpFallsBackToAListWhenWatchesFail(t *testing.T) {
	for _, tc := range watchFailures() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lw := catchUpLW(t, "150", "160", nil, func(_ int, _ metav1.ListOptions) (watch.Interface, error) {
					return tc.fail(watch.NewRaceFreeFake())
				})
				h, store := newCatchUpHarness(t, lw, 0, nil)
				stop := runInBubble(h.r)
				defer stop()

				if tc.retriable {
					time.Sleep(10 * time.Minute)
					synctest.Wait()
					select {
					case <-store.done:
						t.Error("caught up without anything to catch up to")
					default:
					}
					reflectortest.Equal(t, "full lists", fullLists(lw), []string(nil))
					if n := len(lw.WatchOpts()); n < 10 {
						t.Errorf("%d watch attempts in 10 minutes, want retries with backoff", n)
					}
					return
				}

				waitCaughtUp(t, store.done)
				stop()
				// One retry, then the fallback: a consistent read, which is the
				// target unless a watch stayed open long enough for a limit=1
				// read first.
				reflectortest.Equal(t, "requests", head(lw.Requests(), 3), []string{"watch@100", "watch@100", "list@"})
				if got := store.Targets(); len(got) != 1 || (got[0] != "150" && got[0] != "160") {
					t.Errorf("targets = %v, want one: the read's 150 or the list's 160", got)
				}
				reflectortest.Equal(t, "starts", head(h.obs.Starts(), 2), []string{"resumed 100", "listed relist-catchup 160 items=2 pages=1"})
				reflectortest.Equal(t, "store", h.store.Objects(), map[string]string{"a": "5", "b": "6"})
			})
		})
	}
}

// The limit=1 reads keep failing while full lists work: the short watches
// give up after MaxWatches and relist at "", that list is the target (a
// read made after the start), and the reflector goes on with ordinary
// watches. It does not relist every few watches for want of a read.
func TestCatchUpReadsFailingListsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := apierrors.NewInternalError(errors.New("etcd: request timed out"))
		lw := catchUpLW(t, "150", "160", func(int) error { return refused }, serverTimesOut)
		h, store := newCatchUpHarness(t, lw, 2, nil)
		stop := runInBubble(h.r)
		defer stop()

		waitCaughtUp(t, store.done)
		time.Sleep(10 * time.Minute) // ordinary watches come and go
		synctest.Wait()
		stop()

		reflectortest.Equal(t, "targets", store.Targets(), []string{"160"})
		reflectortest.Equal(t, "full lists", fullLists(lw), []string{""})
		reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100", "listed relist-catchup 160 items=2 pages=1"})
		opts := lw.WatchOpts()
		for i, o := range head(opts, 2) {
			reflectortest.Equal(t, "short watch "+strconv.Itoa(i)+" timeoutSeconds", *o.TimeoutSeconds, int64(3))
		}
		for i, o := range tail(opts, 2) {
			if *o.TimeoutSeconds < 300 {
				t.Errorf("watch %d after the list has timeoutSeconds %d, want an ordinary one", i+2, *o.TimeoutSeconds)
			}
		}
	})
}

// A list settles the catch-up even before the store has applied it (a
// large list takes a while to reach the store): the watches after it are
// ordinary ones, which do not count towards another relist.
func TestCatchUpListSettlesBeforeTheStoreAppliesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := catchUpLW(t, "150", "160", nil, serverTimesOut)
		h := newHarness(t, lw.ListWatch(), func(o *Options) {
			o.ResumeResourceVersion = "100"
			// Done stays open: the store never gets to apply the list here.
			o.CatchUp = &CatchUp{Done: make(chan struct{}), MaxWatches: 2}
		})
		stop := runInBubble(h.r)
		defer stop()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()

		reflectortest.Equal(t, "full lists", fullLists(lw), []string{""})
		reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100", "listed relist-catchup 160 items=2 pages=1"})
		opts := lw.WatchOpts()
		for i, o := range tail(opts, 2) {
			if *o.TimeoutSeconds < 300 {
				t.Errorf("watch %d after the list has timeoutSeconds %d, want an ordinary one", i+2, *o.TimeoutSeconds)
			}
		}
	})
}

// noWatchList is a ListWatch that tells client-go's reflector it cannot
// stream lists (sendInitialEvents), so it lists and watches as ours does.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// Differential: client-go's own reflector and ours, each on the same
// script — a list that works and watches that always fail one way — for
// five virtual minutes. client-go starts cold, ours resumes (and, in the
// second run, catches up). For every kind of failure both must agree on
// whether it ends in a relist, and when they relist their stores must hold
// the list. Ours may relist later and less often than client-go (one retry
// first), never more often.
func TestWatchFailuresRelistLikeClientGo(t *testing.T) {
	// client-go's reflector reports watch-start errors through
	// utilruntime.HandleError, whose rate limiter compares the bubble's
	// virtual clock (year 2000) with the real time of the last error and
	// sleeps for the difference: decades. Its errors are dropped here.
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(context.Context, error, string, ...interface{}) {}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	for _, catchUp := range []bool{false, true} {
		for _, tc := range watchFailures() {
			name := tc.name
			if catchUp {
				name = "catching up/" + name
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					script := func() *reflectortest.ScriptedLW {
						return catchUpLW(t, "150", "160", nil, func(_ int, _ metav1.ListOptions) (watch.Interface, error) {
							return tc.fail(watch.NewRaceFreeFake())
						})
					}
					ctx, cancel := context.WithCancel(t.Context())
					var wg sync.WaitGroup
					defer wg.Wait()
					defer cancel()

					// client-go, cold.
					theirLW := script()
					theirStore := cache.NewStore(cache.MetaNamespaceKeyFunc)
					theirs := cache.NewReflectorWithOptions(noWatchList{theirLW.ListWatch()}, &v1.Pod{}, theirStore, cache.ReflectorOptions{})
					wg.Go(func() { theirs.RunWithContext(ctx) })

					// Ours, warm.
					ourLW := script()
					var h *harness
					if catchUp {
						h, _ = newCatchUpHarness(t, ourLW, 0, func(o *Options) { o.WatchErrorHandler = func(context.Context, error) {} })
					} else {
						h = newHarness(t, ourLW.ListWatch(), func(o *Options) {
							o.ResumeResourceVersion = "100"
							o.InitialBackoff, o.MaxBackoff = 0, 0 // client-go's
						})
					}
					wg.Go(func() { h.r.Run(ctx) })

					time.Sleep(5 * time.Minute)
					synctest.Wait()
					cancel()
					wg.Wait()

					theirLists, ourLists := fullLists(theirLW), fullLists(ourLW)
					theirRelists := len(theirLists) - 1 // after the cold list
					ourRelists := len(ourLists)
					if (theirRelists > 0) != (ourRelists > 0) {
						t.Fatalf("client-go relisted %d times, ours %d: they disagree on whether %s ends in a relist\nclient-go: %v\nours:      %v",
							theirRelists, ourRelists, tc.name, theirLW.Requests(), ourLW.Requests())
					}
					// Once listed, both relist from the list's resourceVersion
					// (ours lists at "" first while catching up: see CatchUp).
					for _, lists := range [][]string{tail(theirLists, 1), tail(ourLists, 1)} {
						for _, rv := range lists {
							if rv != "160" {
								t.Errorf("relists at %v, want each at the last list's 160\nclient-go: %v\nours:      %v", lists, theirLW.Requests(), ourLW.Requests())
								break
							}
						}
					}
					if !catchUp && ourRelists > 0 {
						reflectortest.Equal(t, "our first relist (at the resumed version, as client-go's from its last)", ourLists[0], "100")
					}
					reflectortest.Equal(t, "relists", ourRelists > 0, !tc.retriable)
					if ourRelists > theirRelists {
						t.Errorf("ours relisted %d times in 5 minutes, client-go %d: more often", ourRelists, theirRelists)
					}
					if ourRelists > 0 {
						reflectortest.Equal(t, "our store", h.store.Objects(), map[string]string{"a": "5", "b": "6"})
						if keys := theirStore.ListKeys(); len(keys) != 2 {
							t.Errorf("client-go's store holds %v, want the list's 2 pods", keys)
						}
					}
					if n := len(theirLW.WatchOpts()); n < 2 {
						t.Errorf("client-go made %d watch requests in 5 minutes, want them retried", n)
					}
				})
			})
		}
	}
}
