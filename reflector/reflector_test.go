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
// Tests ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/reflector_test.go
// The ports are listed in hack/upstream-versions.txt.

package reflector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// ---- 1. cold start ----------------------------------------------------------

func TestColdStartListsAtZeroThenWatchesFromListRV(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) {
		return reflectortest.PodList("10", reflectortest.Pod("a", "5"), reflectortest.Pod("b", "7")), nil
	}}
	h := newHarness(t, lw.ListWatch(), nil)
	reflectortest.Equal(t, "LastSyncResourceVersion before Run", h.r.LastSyncResourceVersion(), "")
	stop := h.run()

	w := lw.Watcher(t, 0)
	w.Add(reflectortest.Pod("c", "11"))
	poll.Until(t, 5*time.Second, "LastSyncResourceVersion 11", func() bool { return h.r.LastSyncResourceVersion() == "11" })
	stop()
	if !w.IsStopped() {
		t.Error("watcher not stopped after cancel")
	}

	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0"})
	reflectortest.Equal(t, "first list Limit (pager default for RV 0)", lw.ListOpts()[0].Limit, int64(500))
	wo := lw.WatchOpts()
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"10"})
	if !wo[0].AllowWatchBookmarks {
		t.Error("watch did not allow bookmarks")
	}
	if ts := wo[0].TimeoutSeconds; ts == nil || *ts < 300 || *ts >= 600 {
		t.Errorf("TimeoutSeconds = %v, want in [300, 600)", ts)
	}
	reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 2@10", "add c@11"})
	reflectortest.Equal(t, "store objects", h.store.Objects(), map[string]string{"a": "5", "b": "7", "c": "11"})
	reflectortest.Equal(t, "observer", h.obs.Events(), []string{"listed cold 10 items=2 pages=1", "watch 10", "ended ok"})
	h.errs.CheckNone(t)
}

// ---- 2. resume --------------------------------------------------------------

func TestResumeWatchesFromResourceVersionWithoutListing(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t} // any List call fails the test
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "100" })
	reflectortest.Equal(t, "LastSyncResourceVersion before Run", h.r.LastSyncResourceVersion(), "100")
	stop := h.run()

	w := lw.Watcher(t, 0)
	w.Modify(reflectortest.Pod("a", "101"))
	w.Delete(reflectortest.Pod("b", "102"))
	poll.Until(t, 5*time.Second, "LastSyncResourceVersion 102", func() bool { return h.r.LastSyncResourceVersion() == "102" })
	stop()

	reflectortest.Equal(t, "list calls", len(lw.ListOpts()), 0)
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100"})
	reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"update a@101", "delete b@102"})
	reflectortest.Equal(t, "observer", h.obs.Events(), []string{"resumed 100", "watch 100", "ended ok"})
	h.errs.CheckNone(t)
}

func TestResumeFromZeroIsAColdStart(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) { return reflectortest.PodList("10"), nil }}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "0" })
	stop := h.run()
	lw.Watcher(t, 0)
	stop()
	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0"})
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed cold 10 items=0 pages=1"})
}

// ---- 3. resume answered with 410 / too large ---------------------------------

// An expired resume relists once, as client-go relists after a watch 410:
// at the last resourceVersion and unpaged, so the apiserver's watch cache
// serves it ("not older than"). A too-large one relists at "" (a consistent
// read, paged).
func TestResumeUnavailableRelistsOnce(t *testing.T) {
	inStream := func(s metav1.Status) func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) {
		return func(w *watch.RaceFreeFakeWatcher) (watch.Interface, error) {
			w.Error(&s)
			return w, nil
		}
	}
	httpErr := func(err error) func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) {
		return func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) { return nil, err }
	}
	// What a restarted kube-apiserver sends: HTTP 200, then one ERROR event.
	expired := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "The resourceVersion for the provided watch is too old."}
	goneNoReason := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Message: "too old resource version: 100 (150)"}
	oldTooLarge := apierrors.NewTimeoutError("Too large resource version", 1) // 1.17.0–1.18.5 servers
	oldTooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: "Too large resource version"}}

	for _, tc := range []struct {
		name     string
		first    func(*watch.RaceFreeFakeWatcher) (watch.Interface, error)
		tooLarge bool
	}{
		{"in-stream ERROR 410 Expired", inStream(expired), false},
		{"in-stream ERROR 410 without reason", inStream(goneNoReason), false},
		{"in-stream ERROR too large resource version", inStream(tooLargeRV().ErrStatus), true},
		{"HTTP 410 Expired", httpErr(apierrors.NewResourceExpired("too old resource version: 100 (150)")), false},
		//lint:ignore SA1019 reason Gone, which older apiservers send, must still trigger a relist
		{"HTTP 410 Gone", httpErr(apierrors.NewGone("gone")), false},
		{"HTTP too large resource version", httpErr(tooLargeRV()), true},
		{"HTTP too large resource version, 1.17 format", httpErr(oldTooLarge), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{
				T: t,
				List: func(int, metav1.ListOptions) (runtime.Object, error) {
					return reflectortest.PodList("200", reflectortest.Pod("a", "150")), nil
				},
				Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
					w := watch.NewRaceFreeFake()
					if n == 0 {
						return tc.first(w)
					}
					return w, nil
				},
			}
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "100" })
			stop := h.run()
			lw.Watcher(t, 1)
			stop()

			if tc.tooLarge {
				reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{""})
				reflectortest.Equal(t, "list Limit (pager default for RV \"\")", lw.ListOpts()[0].Limit, int64(500))
			} else {
				reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"100"})
				reflectortest.Equal(t, "list Limit (unpaged, for the watch cache)", lw.ListOpts()[0].Limit, int64(0))
			}
			reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "200"})
			reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 1@200"})
			reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100", "listed relist-expired 200 items=1 pages=1"})
			reflectortest.Equal(t, "LastSyncResourceVersion", h.r.LastSyncResourceVersion(), "200")
			errs := h.errs.Errors()
			if len(errs) != 1 || !errors.Is(errs[0], ErrWatch) || !isResourceVersionUnavailable(errs[0]) {
				t.Errorf("errors = %v, want one ErrWatch with an expired/too-large cause", errs)
			}
		})
	}
}

// ---- 4. normal close / timeout ---------------------------------------------

func TestWatchCloseRewatchesFromLastEventRVWithoutListing(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) { return reflectortest.PodList("10"), nil }}
	h := newHarness(t, lw.ListWatch(), nil)
	stop := h.run()

	w := lw.Watcher(t, 0)
	w.Add(reflectortest.Pod("a", "11"))
	w.Modify(reflectortest.Pod("a", "12"))
	w.Stop() // the server closed the watch (e.g. TimeoutSeconds elapsed)
	lw.Watcher(t, 1)
	stop()

	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0"})
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"10", "12"})
	reflectortest.Equal(t, "observer", h.obs.Events(), []string{
		"listed cold 10 items=0 pages=1", "watch 10", "ended ok", "watch 12", "ended ok"})
	h.errs.CheckNone(t)
}

// ---- 5. bookmarks -----------------------------------------------------------

func TestBookmarksReachStoreAndAdvanceRV(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = "5" })
	stop := h.run()

	w := lw.Watcher(t, 0)
	w.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20"}})
	poll.Until(t, 5*time.Second, "LastSyncResourceVersion 20", func() bool { return h.r.LastSyncResourceVersion() == "20" })
	w.Stop()
	lw.Watcher(t, 1)
	stop()

	reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"bookmark@20"})
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"5", "20"})
	reflectortest.Equal(t, "list calls", len(lw.ListOpts()), 0)
	h.errs.CheckNone(t)
}

// rvuStore also implements cache.ResourceVersionUpdater.
type rvuStore struct {
	*reflectortest.RecordingStore
	mu  sync.Mutex
	rvs []string
}

func (s *rvuStore) UpdateResourceVersion(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rvs = append(s.rvs, rv)
}

func (s *rvuStore) RVs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rvs)
}

func TestResourceVersionUpdaterStoreSeesEveryRecordedRV(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t}
	store := &rvuStore{RecordingStore: reflectortest.NewRecordingStore()}
	r := New(lw.ListWatch(), store, Options{ResumeResourceVersion: "5", WatchErrorHandler: (&reflectortest.ErrorRecorder{}).Handle})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	w := lw.Watcher(t, 0)
	w.Add(reflectortest.Pod("a", "6"))
	w.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}})
	poll.Until(t, 5*time.Second, "rv 9", func() bool { return r.LastSyncResourceVersion() == "9" })
	cancel()
	<-done
	reflectortest.Equal(t, "UpdateResourceVersion calls", store.RVs(), []string{"6", "9"})
}

func TestDefaultErrorHandlerHandlesEveryKind(t *testing.T) {
	r := New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{ExpectedType: &v1.Pod{}})
	ctx := context.Background()
	for _, err := range []error{
		fmt.Errorf("%w: x: %w", ErrWatch, apierrors.NewResourceExpired("too old")),
		fmt.Errorf("%w: x: %w", ErrWatch, apierrors.NewTooManyRequests("slow", 1)),
		fmt.Errorf("%w: x: %w", ErrWatch, apierrors.NewInternalError(errors.New("boom"))),
		fmt.Errorf("%w: x: %w", ErrWatch, syscall.ECONNREFUSED),
		fmt.Errorf("%w: x: %w", ErrList, errors.New("boom")),
		fmt.Errorf("%w: x", ErrUnexpectedObject),
		fmt.Errorf("%w: x: %w", ErrStore, errors.New("disk full")),
	} {
		r.defaultErrorHandler(ctx, err) // must not panic or block
	}
}

// ---- 6. paging --------------------------------------------------------------

// pagedList serves items honouring Limit and Continue (continue = offset).
func pagedList(rv string, items []*v1.Pod) func(int, metav1.ListOptions) (runtime.Object, error) {
	return func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(items)
		l := reflectortest.PodList(rv)
		if opts.Limit > 0 && start+int(opts.Limit) < end {
			end = start + int(opts.Limit)
			l.Continue = strconv.Itoa(end)
		}
		for _, p := range items[start:end] {
			l.Items = append(l.Items, *p)
		}
		return l, nil
	}
}

func TestListPagesWithPageSize(t *testing.T) {
	var pods []*v1.Pod
	for i := range 5 {
		pods = append(pods, reflectortest.Pod(fmt.Sprintf("p%d", i), strconv.Itoa(i+1)))
	}
	lw := &reflectortest.ScriptedLW{T: t, List: pagedList("10", pods)}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = 2 })
	stop := h.run()
	lw.Watcher(t, 0)
	stop()

	// The pager drops the RV on continuation requests.
	reflectortest.Equal(t, "list options", lw.ListOpts(), []metav1.ListOptions{
		{ResourceVersion: "0", Limit: 2},
		{Limit: 2, Continue: "2"},
		{Limit: 2, Continue: "4"},
	})
	reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 5@10"})
	reflectortest.Equal(t, "store objects", len(h.store.Objects()), 5)
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed cold 10 items=5 pages=3"})
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"10"})
}

// listAndWatchOnce calls ListAndWatch with a context that the first Watch
// call cancels, so only the list part runs to completion (the pattern of
// client-go's reflector tests).
type onceLW struct {
	*reflectortest.ScriptedLW
	cancel context.CancelFunc
}

func newOnceLW(t *testing.T, list func(int, metav1.ListOptions) (runtime.Object, error)) *onceLW {
	o := &onceLW{ScriptedLW: &reflectortest.ScriptedLW{T: t, List: list}}
	o.Watch = func(int, metav1.ListOptions) (watch.Interface, error) {
		o.cancel() // called on the ListAndWatch goroutine: no race
		return watch.NewRaceFreeFake(), nil
	}
	return o
}

func (o *onceLW) listAndWatch(t *testing.T, r *Reflector) {
	t.Helper()
	var ctx context.Context
	ctx, o.cancel = context.WithCancel(context.Background())
	defer o.cancel()
	if err := r.ListAndWatch(ctx); err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	assertNoReflectorGoroutines(t)
}

// TestListPageSizeChoice ports client-go's TestReflectorWatchListPageSize,
// TestReflectorNotPaginatingNotConsistentReads and
// TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled.
func TestListPageSizeChoice(t *testing.T) {
	tenPods := make([]*v1.Pod, 10)
	for i := range tenPods {
		tenPods[i] = reflectortest.Pod(fmt.Sprintf("pod-%d", i), strconv.Itoa(i))
	}
	// serverPages ignores Limit and always pages by 4, as a server without
	// watch cache with a small max page would.
	serverPages := func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		switch opts.Continue {
		case "":
			return &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10", Continue: "C1"}, Items: reflectortest.PodList("", tenPods[0:4]...).Items}, nil
		case "C1":
			return &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10", Continue: "C2"}, Items: reflectortest.PodList("", tenPods[4:8]...).Items}, nil
		default:
			return &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: reflectortest.PodList("", tenPods[8:10]...).Items}, nil
		}
	}
	for _, tc := range []struct {
		name       string
		pageSize   int64
		list       func(int, metav1.ListOptions) (runtime.Object, error)
		wantLimits []int64 // Limit of the first request of each list
		wantPages  []int
	}{
		{"default: RV 0 paged by 500, RV 10 unpaged (watch cache)", 0, pagedList("10", tenPods), []int64{500, 0}, []int{1, 1}},
		{"default: paginated RV 0 list keeps paging later", 0, serverPages, []int64{500, 500}, []int{3, 3}},
		{"explicit PageSize applies to every list", 4, pagedList("10", tenPods), []int64{4, 4}, []int{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := newOnceLW(t, tc.list)
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = tc.pageSize })
			lw.listAndWatch(t, h.r)
			lw.listAndWatch(t, h.r)

			var limits []int64
			var rvs []string
			for _, o := range lw.ListOpts() {
				if o.Continue == "" {
					limits = append(limits, o.Limit)
					rvs = append(rvs, o.ResourceVersion)
				}
			}
			reflectortest.Equal(t, "first-page RVs", rvs, []string{"0", "10"})
			reflectortest.Equal(t, "first-page limits", limits, tc.wantLimits)
			reflectortest.Equal(t, "starts", h.obs.Starts(), []string{
				fmt.Sprintf("listed cold 10 items=10 pages=%d", tc.wantPages[0]),
				fmt.Sprintf("listed relist-error 10 items=10 pages=%d", tc.wantPages[1]),
			})
			reflectortest.Equal(t, "store objects", len(h.store.Objects()), 10)
		})
	}
}

// TestListFallbackIfExpired ports client-go's TestReflectorFullListIfExpired:
// an expired continue token makes the pager fall back to one full list.
func TestListFallbackIfExpired(t *testing.T) {
	pods := make([]*v1.Pod, 8)
	for i := range pods {
		pods[i] = reflectortest.Pod(fmt.Sprintf("pod-%d", i), strconv.Itoa(i))
	}
	key := func(rv, c string, l int64) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, Continue: c, Limit: l}
	}
	lw := newOnceLW(t, func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		switch key(opts.ResourceVersion, opts.Continue, opts.Limit) {
		case key("0", "", 4): // initial limited list
			return reflectortest.PodList("10", pods[0:4]...), nil
		case key("10", "", 4): // first page of the RV 10 relist
			l := reflectortest.PodList("11", pods[0:4]...)
			l.Continue = "C1"
			return l, nil
		case key("", "C1", 4): // second page has expired
			return nil, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
		case key("10", "", 0): // full list at RV 10
			return reflectortest.PodList("11", pods...), nil
		}
		err := fmt.Errorf("unexpected list options: %#v", opts)
		t.Error(err)
		return nil, err
	})
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = 4 })
	lw.listAndWatch(t, h.r)
	reflectortest.Equal(t, "objects after first list", len(h.store.Objects()), 4)
	lw.listAndWatch(t, h.r)
	reflectortest.Equal(t, "objects after relist", len(h.store.Objects()), 8)

	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0", "10", "", "10"})
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{
		"listed cold 10 items=4 pages=1", "listed relist-error 11 items=8 pages=1"})
}

// TestListFallbackIfTooLarge ports client-go's TestReflectorFullListIfTooLarge:
// a list at a too-new RV is retried at "" at once, in all three error formats.
func TestListFallbackIfTooLarge(t *testing.T) {
	version := 30
	lw := newOnceLW(t, func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		switch opts.ResourceVersion {
		case "0":
			return reflectortest.PodList("20"), nil
		case "20":
			return nil, tooLargeRV()
		case "30":
			err := apierrors.NewTimeoutError("too large resource version", 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: "Too large resource version"}}
			return nil, err
		case "40":
			return nil, apierrors.NewTimeoutError("Too large resource version", 1)
		case "":
			rv := strconv.Itoa(version)
			version += 10
			return reflectortest.PodList(rv), nil
		}
		return nil, fmt.Errorf("unexpected List at %q", opts.ResourceVersion)
	})
	h := newHarness(t, lw.ListWatch(), nil)
	for range 4 {
		lw.listAndWatch(t, h.r)
	}
	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0", "20", "", "30", "", "40", ""})
	reflectortest.Equal(t, "LastSyncResourceVersion", h.r.LastSyncResourceVersion(), "50")
}

// ---- 7. resync --------------------------------------------------------------

func TestResyncCallsStoreWhenShouldResyncSaysSo(t *testing.T) {
	var asks atomic.Int32
	lw := &reflectortest.ScriptedLW{T: t}
	h := newHarness(t, lw.ListWatch(), func(o *Options) {
		o.ResumeResourceVersion = "1"
		o.ResyncPeriod = time.Millisecond
		o.ShouldResync = func() bool { return asks.Add(1)%2 == 1 } // yes, no, yes, ...
	})
	stop := h.run()
	poll.Until(t, 5*time.Second, "6 ShouldResync calls", func() bool { return asks.Load() >= 6 })
	stop()

	n := int(asks.Load())
	reflectortest.Equal(t, "Resync calls (one per yes)", h.store.Resyncs(), (n+1)/2)
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"1"})
	h.errs.CheckNone(t)
}

func TestResyncNilShouldResyncMeansAlways(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t}
	h := newHarness(t, lw.ListWatch(), func(o *Options) {
		o.ResumeResourceVersion = "1"
		o.ResyncPeriod = time.Millisecond
	})
	stop := h.run()
	poll.Until(t, 5*time.Second, "3 resyncs", func() bool { return h.store.Resyncs() >= 3 })
	stop()
}

func TestResyncErrorEndsWatchAndRelists(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: func(n int, _ metav1.ListOptions) (runtime.Object, error) {
		return reflectortest.PodList(strconv.Itoa(10+n), reflectortest.Pod("a", "5")), nil
	}}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResyncPeriod = time.Millisecond })
	h.store.SetResyncErr(errors.New("disk full"))
	stop := h.run()
	lw.Watcher(t, 1)
	stop()

	reflectortest.Equal(t, "list RVs", lw.ListRVs()[:2], []string{"0", "10"})
	reflectortest.Equal(t, "relist Limit (served from watch cache)", lw.ListOpts()[1].Limit, int64(0))
	reflectortest.Equal(t, "starts", h.obs.Starts()[:2], []string{"listed cold 10 items=1 pages=1", "listed relist-error 11 items=1 pages=1"})
	errs := h.errs.Errors()
	if len(errs) == 0 || !errors.Is(errs[0], ErrStore) {
		t.Errorf("errors = %v, want an ErrStore first", errs)
	}
}

// ---- 8. stopping ------------------------------------------------------------

func TestRunReturnsPromptlyOnCancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lw      func(started chan<- struct{}) cache.ListerWatcher
		mutate  func(*Options)
		wantErr bool
	}{
		{
			name: "while watching, with resync running",
			lw: func(started chan<- struct{}) cache.ListerWatcher {
				return &cache.ListWatch{
					ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
						return reflectortest.PodList("1"), nil
					},
					WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
						close(started)
						return watch.NewFake(), nil // unbuffered, never sends
					},
				}
			},
			mutate: func(o *Options) { o.ResyncPeriod = time.Hour },
		},
		{
			name: "while backing off",
			lw: func(started chan<- struct{}) cache.ListerWatcher {
				var once sync.Once
				return &cache.ListWatch{
					ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
						return reflectortest.PodList("1"), nil
					},
					WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
						once.Do(func() { close(started) })
						return nil, errors.New("boom")
					},
				}
			},
			mutate:  func(o *Options) { o.InitialBackoff, o.MaxBackoff = time.Hour, time.Hour },
			wantErr: true,
		},
		{
			name: "while listing",
			lw: func(started chan<- struct{}) cache.ListerWatcher {
				return &cache.ListWatch{
					ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
						close(started)
						<-ctx.Done()
						return nil, ctx.Err()
					},
					WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
				}
			},
		},
		{
			name: "while a watch request hangs",
			lw: func(started chan<- struct{}) cache.ListerWatcher {
				return &cache.ListWatch{
					ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
						return reflectortest.PodList("1"), nil
					},
					WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
						close(started)
						<-ctx.Done()
						return nil, ctx.Err()
					},
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			h := newHarness(t, tc.lw(started), tc.mutate)
			stop := h.run()
			<-started
			if tc.wantErr {
				poll.Until(t, 5*time.Second, "error reported", func() bool { return len(h.errs.Errors()) > 0 })
			}
			begin := time.Now()
			stop() // fails the test if Run takes over 1s or leaks
			if d := time.Since(begin); d > 500*time.Millisecond {
				t.Errorf("Run took %v to return after cancel", d)
			}
			if !tc.wantErr {
				h.errs.CheckNone(t)
			}
		})
	}
}

// TestRunLeavesNoGoroutinesInBubble runs a full resume → 410 → relist →
// watch → resync cycle inside a synctest bubble, which fails the test if any
// goroutine started inside it is still alive (durably blocked) at the end.
func TestRunLeavesNoGoroutinesInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := &reflectortest.ScriptedLW{
			T:    t,
			List: func(int, metav1.ListOptions) (runtime.Object, error) { return reflectortest.PodList("200"), nil },
			Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
				if n == 0 {
					return nil, apierrors.NewResourceExpired("too old")
				}
				return watch.NewRaceFreeFake(), nil
			},
		}
		store := reflectortest.NewRecordingStore()
		r := New(lw.ListWatch(), store, Options{
			ExpectedType:          &v1.Pod{},
			ResumeResourceVersion: "100",
			ResyncPeriod:          time.Minute,
			WatchErrorHandler:     func(context.Context, error) {},
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		time.Sleep(10 * time.Minute) // virtual time
		synctest.Wait()
		reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "200"})
		reflectortest.Equal(t, "resyncs in 10 virtual minutes", store.Resyncs() >= 9, true)
		cancel()
		<-done
	})
}

// ---- 9. watch failures: retried once, then a relist (see watchfail_test.go) --

func TestWatchFailureAfterColdListRetriedOnceThenRelisted(t *testing.T) {
	lw := &reflectortest.ScriptedLW{
		T: t,
		List: func(n int, _ metav1.ListOptions) (runtime.Object, error) {
			return reflectortest.PodList(strconv.Itoa(10 + n)), nil
		},
		Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
			if n < 3 {
				return nil, errors.New("boom")
			}
			return watch.NewRaceFreeFake(), nil
		},
	}
	h := newHarness(t, lw.ListWatch(), nil)
	stop := h.run()
	lw.Watcher(t, 3)
	stop()
	// The second failure in a row relists, from where the store is; the
	// list resets the count, so the third failure is retried again.
	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"0", "10"})
	if opts := lw.ListOpts(); len(opts) > 1 {
		reflectortest.Equal(t, "relist Limit (served from watch cache)", opts[1].Limit, int64(0))
	}
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"10", "10", "11", "11"})
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed cold 10 items=0 pages=1", "listed relist-error 11 items=0 pages=1"})
}

// TestWatchRetryBackoffDefaults checks client-go's default backoff (800ms
// doubling, jitter 1.0, capped at 30s) in virtual time. BackoffReset is
// raised so that the sequence reaches the cap before it restarts. The
// watches are refused a connection, which is retried without limit.
func TestWatchRetryBackoffDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 8
		var times []time.Time // written by Run's goroutine, read after it ends
		lw := &cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				t.Error("unexpected list")
				return nil, errors.New("unexpected list")
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				times = append(times, time.Now())
				if len(times) <= failures {
					return nil, connRefused()
				}
				return watch.NewRaceFreeFake(), nil
			},
		}
		r := New(lw, reflectortest.NewRecordingStore(), Options{
			ResumeResourceVersion: "1",
			BackoffReset:          time.Hour,
			WatchErrorHandler:     func(context.Context, error) {},
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		time.Sleep(10 * time.Minute) // virtual
		synctest.Wait()
		cancel()
		<-done

		if len(times) != failures+1 {
			t.Fatalf("%d watch attempts, want %d", len(times), failures+1)
		}
		base := 800 * time.Millisecond
		for i := 1; i < len(times); i++ {
			d := times[i].Sub(times[i-1])
			if d < base || d >= 2*base {
				t.Errorf("retry %d after %v, want in [%v, %v)", i, d, base, 2*base)
			}
			base = min(2*base, 30*time.Second)
		}
	})
}

// ---- 10. observer causes ----------------------------------------------------

func TestObserverStartCauses(t *testing.T) {
	expired := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old"}
	lw := &reflectortest.ScriptedLW{
		T: t,
		List: func(n int, _ metav1.ListOptions) (runtime.Object, error) {
			return reflectortest.PodList(strconv.Itoa(200+10*n), reflectortest.Pod("a", "150")), nil
		},
		Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if n == 0 {
				w.Error(&expired)
			}
			return w, nil
		},
	}
	h := newHarness(t, lw.ListWatch(), func(o *Options) {
		o.ResumeResourceVersion = "100"
		o.ResyncPeriod = time.Millisecond
	})
	stop := h.run()
	lw.Watcher(t, 1)
	h.store.SetResyncErr(errors.New("disk full"))
	lw.Watcher(t, 2)
	stop()

	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{
		"resumed 100",
		"listed relist-expired 200 items=1 pages=1",
		"listed relist-error 210 items=1 pages=1",
	})
	reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{"100", "200"})
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "200", "210"})

	// And a cold start reports CauseCold (also covered in test 1).
	lw2 := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) { return reflectortest.PodList("7"), nil }}
	h2 := newHarness(t, lw2.ListWatch(), nil)
	stop2 := h2.run()
	lw2.Watcher(t, 0)
	stop2()
	reflectortest.Equal(t, "cold starts", h2.obs.Starts(), []string{"listed cold 7 items=0 pages=1"})
}

// ---- type checks ------------------------------------------------------------

func TestUnexpectedObjectsAreReportedAndSkipped(t *testing.T) {
	u := func(apiVersion, kind, name, rv string) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(apiVersion)
		obj.SetKind(kind)
		obj.SetName(name)
		obj.SetResourceVersion(rv)
		return obj
	}
	for _, tc := range []struct {
		name     string
		expected runtime.Object
		bad      runtime.Object
		good     runtime.Object
	}{
		{"typed", &v1.Pod{}, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", ResourceVersion: "2"}}, reflectortest.Pod("a", "3")},
		{"unstructured GVK", u("v1", "Pod", "", ""), u("v1", "ConfigMap", "cm", "2"), u("v1", "Pod", "a", "3")},
		{"unstructured Table", nil, u("meta.k8s.io/v1", "Table", "t", "2"), u("v1", "Pod", "a", "3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{T: t}
			h := newHarness(t, lw.ListWatch(), func(o *Options) {
				o.ResumeResourceVersion = "1"
				o.ExpectedType = tc.expected
			})
			stop := h.run()
			w := lw.Watcher(t, 0)
			w.Add(tc.bad)
			w.Add(tc.good)
			poll.Until(t, 5*time.Second, "good object stored", func() bool { return h.store.Objects()["a"] == "3" })
			stop()

			reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"add a@3"})
			errs := h.errs.Errors()
			if len(errs) != 1 || !errors.Is(errs[0], ErrUnexpectedObject) {
				t.Errorf("errors = %v, want one ErrUnexpectedObject", errs)
			}
		})
	}
}

func TestTypeDescriptionAndDefaultName(t *testing.T) {
	withGVK := &unstructured.Unstructured{}
	withGVK.SetAPIVersion("v1")
	withGVK.SetKind("Pod")
	for _, tc := range []struct {
		obj  runtime.Object
		want string
	}{
		{nil, "<unspecified>"},
		{&v1.Pod{}, "*v1.Pod"},
		{&unstructured.Unstructured{}, "*unstructured.Unstructured"},
		{withGVK, "/v1, Kind=Pod"},
	} {
		r := New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{ExpectedType: tc.obj})
		reflectortest.Equal(t, "type description", r.typeDescription, tc.want)
		reflectortest.Equal(t, "default name", r.name, tc.want)
	}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	r := New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{Name: "deploys", ExpectedGVK: &gvk})
	reflectortest.Equal(t, "explicit GVK description", r.typeDescription, gvk.String())
	reflectortest.Equal(t, "explicit name", r.name, "deploys")
}

func TestNewPanicsOnMisuse(t *testing.T) {
	for name, f := range map[string]func(){
		"nil lw":            func() { New(nil, reflectortest.NewRecordingStore(), Options{}) },
		"nil store":         func() { New(&cache.ListWatch{}, nil, Options{}) },
		"negative PageSize": func() { New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{PageSize: -1}) },
		"negative resync":   func() { New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{ResyncPeriod: -1}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			f()
		})
	}
}

// ---- end to end against client-go's FakeControllerSource ----------------------

// sourceLW wraps FakeControllerSource. It reports watch-list semantics as
// unsupported (client-go's reflector would otherwise try watch-list against
// it and hang; this package never uses watch-list, but the wrapper keeps the
// fixture safe for both) and records request resourceVersions.
type sourceLW struct {
	*fcache.FakeControllerSource
	mu               sync.Mutex
	listRVs, watchRV []string
}

func (s *sourceLW) IsWatchListSemanticsUnSupported() bool { return true }

func (s *sourceLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.listRVs = append(s.listRVs, opts.ResourceVersion)
	s.mu.Unlock()
	return s.FakeControllerSource.List(opts)
}

func (s *sourceLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	s.watchRV = append(s.watchRV, opts.ResourceVersion)
	s.mu.Unlock()
	return s.FakeControllerSource.Watch(opts)
}

func (s *sourceLW) reset() (lists, watches []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lists, watches = s.listRVs, s.watchRV
	s.listRVs, s.watchRV = nil, nil
	return lists, watches
}

func TestFakeControllerSourceColdResumeAndExpiry(t *testing.T) {
	src := &sourceLW{FakeControllerSource: fcache.NewFakeControllerSource()}
	t.Cleanup(src.Shutdown)
	src.Add(reflectortest.Pod("a", "")) // rv 1
	src.Add(reflectortest.Pod("b", "")) // rv 2

	// Cold start: list at "0", then watch.
	h1 := newHarness(t, src, nil)
	stop := h1.run()
	poll.Until(t, 5*time.Second, "cold list", func() bool { return len(h1.store.Objects()) == 2 })
	src.Add(reflectortest.Pod("c", ""))    // rv 3
	src.Modify(reflectortest.Pod("a", "")) // rv 4
	poll.Until(t, 5*time.Second, "rv 4", func() bool { return h1.r.LastSyncResourceVersion() == "4" })
	stop()
	lists, _ := src.reset()
	reflectortest.Equal(t, "cold list RVs", lists, []string{"0"})
	reflectortest.Equal(t, "cold objects", h1.store.Objects(), map[string]string{"a": "4", "b": "2", "c": "3"})

	// Down for a while; then resume from the stored RV with no list.
	src.Modify(reflectortest.Pod("c", "")) // rv 5
	h2 := newHarness(t, src, func(o *Options) { o.ResumeResourceVersion = h1.r.LastSyncResourceVersion() })
	stop = h2.run()
	poll.Until(t, 5*time.Second, "rv 5", func() bool { return h2.r.LastSyncResourceVersion() == "5" })
	stop()
	lists, watches := src.reset()
	reflectortest.Equal(t, "resume list RVs", lists, []string(nil))
	reflectortest.Equal(t, "resume watch RVs", watches, []string{"4"})
	reflectortest.Equal(t, "resume store calls", h2.store.Calls(), []string{"update c@5"})

	// Down while history is compacted: the resume gets 410 and relists no
	// older than the resume point (the fake source serves the newest list).
	src.ResetWatch()
	src.Delete(reflectortest.Pod("b", "")) // rv 6
	src.Add(reflectortest.Pod("d", ""))    // rv 7
	h3 := newHarness(t, src, func(o *Options) { o.ResumeResourceVersion = h2.r.LastSyncResourceVersion() })
	stop = h3.run()
	poll.Until(t, 5*time.Second, "relist at rv 7", func() bool { return h3.r.LastSyncResourceVersion() == "7" })
	poll.Until(t, 5*time.Second, "watch from 7", func() bool { return len(h3.obs.Events()) >= 3 })
	stop()
	lists, watches = src.reset()
	reflectortest.Equal(t, "expired list RVs", lists, []string{"5"})
	reflectortest.Equal(t, "expired watch RVs", watches, []string{"5", "7"})
	reflectortest.Equal(t, "expired objects", h3.store.Objects(), map[string]string{"a": "4", "c": "5", "d": "7"})
	reflectortest.Equal(t, "expired starts", h3.obs.Starts(), []string{"resumed 5", "listed relist-expired 7 items=3 pages=1"})
}

// ListAfter holds back what a resumed reflector's relist after a 410 hands
// the store until the channel closes; the list request itself, and the
// resumed watch, are not held. The next watch follows the list's
// application.
func TestListAfterHoldsListResults(t *testing.T) {
	// In a bubble the reflector's 1–4 ms backoffs run in virtual time, and
	// synctest.Wait returns once it is blocked on the gate or a backoff
	// timer, so "nothing applied yet" is checked after everything that
	// could apply it.
	synctest.Test(t, func(t *testing.T) {
		lw := &reflectortest.ScriptedLW{T: t,
			List: func(int, metav1.ListOptions) (runtime.Object, error) {
				return reflectortest.PodList("20", reflectortest.Pod("a", "20")), nil
			},
			Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
				if n == 0 {
					return nil, apierrors.NewResourceExpired("too old resource version: 10 (15)")
				}
				return watch.NewRaceFreeFake(), nil
			},
		}
		gate := make(chan struct{})
		h := newHarness(t, lw.ListWatch(), func(o *Options) {
			o.ResumeResourceVersion = "10"
			o.ListAfter = func() <-chan struct{} { return gate }
		})
		stop := h.run()
		time.Sleep(time.Second) // many backoffs, in virtual time
		synctest.Wait()
		if got := len(lw.ListOpts()); got != 1 {
			t.Fatalf("listed %d times before ListAfter closed, want 1", got)
		}
		if calls := h.store.Calls(); len(calls) != 0 {
			t.Fatalf("store calls %v before ListAfter closed, want none", calls)
		}
		if got := len(lw.WatchOpts()); got != 1 {
			t.Fatalf("%d watches while the list was held, want only the resumed one", got)
		}
		close(gate)
		synctest.Wait()
		reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 1@20"})
		reflectortest.Equal(t, "lists", len(lw.ListOpts()), 1)
		reflectortest.Equal(t, "watch resourceVersions", lw.WatchRVs(), []string{"10", "20"})
		stop()
	})
}

// A reflector held by ListAfter returns when its context ends, having
// handed the store nothing.
func TestListAfterReturnsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := &reflectortest.ScriptedLW{T: t, List: func(int, metav1.ListOptions) (runtime.Object, error) { return reflectortest.PodList("20"), nil }}
		h := newHarness(t, lw.ListWatch(), func(o *Options) { never := make(chan struct{}); o.ListAfter = func() <-chan struct{} { return never } })
		stop := h.run()
		synctest.Wait() // Run is blocked on ListAfter
		stop()          // fails if Run does not return within a second
		if calls := h.store.Calls(); len(calls) != 0 {
			t.Fatalf("store calls %v while held, want none", calls)
		}
	})
}

// A resumed start whose own first watch is answered 410 (as a status, or as
// the stream's first event) lists at once, as a cold start does: the
// process has just started. A watch that delivered events first, or any
// later one, waits a backoff interval before the relist, as client-go's
// does, spreading the relists of running clients.
func TestRelistAfterExpiredResumeWithoutBackoff(t *testing.T) {
	expired := apierrors.NewResourceExpired("too old resource version")
	for _, tc := range []struct {
		name    string
		watch   func(n int) (watch.Interface, error)
		backoff bool
	}{
		{"status on the resumed watch", func(n int) (watch.Interface, error) {
			if n == 0 {
				return nil, expired
			}
			return watch.NewRaceFreeFake(), nil
		}, false},
		{"first event of the resumed watch", func(n int) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if n == 0 {
				w.Error(&expired.ErrStatus)
			}
			return w, nil
		}, false},
		{"after an event of the resumed watch", func(n int) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if n == 0 {
				w.Modify(reflectortest.Pod("a", "101"))
				w.Error(&expired.ErrStatus)
			}
			return w, nil
		}, true},
		{"on a later watch", func(n int) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			switch n {
			case 0:
				w.Stop() // closed by the server: re-watched at once
			case 1:
				w.Error(&expired.ErrStatus)
			}
			return w, nil
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				listed := make(chan struct{}, 1)
				lw := &reflectortest.ScriptedLW{
					T: t,
					List: func(int, metav1.ListOptions) (runtime.Object, error) {
						select {
						case listed <- struct{}{}:
						default: // a second list: the count below fails
						}
						return reflectortest.PodList("200"), nil
					},
					Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) { return tc.watch(n) },
				}
				r := New(lw.ListWatch(), reflectortest.NewRecordingStore(), Options{
					ExpectedType:          &v1.Pod{},
					ResumeResourceVersion: "100",
					MinWatchTimeout:       time.Hour,
					WatchErrorHandler:     func(context.Context, error) {},
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					r.Run(ctx)
				}()
				synctest.Wait() // no virtual time has passed
				if listed := len(lw.ListRVs()) > 0; listed == tc.backoff {
					t.Errorf("listed before any time passed: %v, want %v", listed, !tc.backoff)
				}
				<-listed // after the backoff, where there is one (virtual time)
				synctest.Wait()
				reflectortest.Equal(t, "lists", len(lw.ListRVs()), 1)
				cancel()
				<-done
			})
		})
	}
}

// A watch made after a failed watch's backoff that finds its resourceVersion
// gone (as after an apiserver restart: connection refused, then 410 from
// the new apiserver) lists at once: the backoff before the relist has been
// waited, as client-go waits one. A watch re-made at once after a normal
// close waits its backoff before the relist.
func TestRelistAfterExpiredOnceBackedOff(t *testing.T) {
	expired := apierrors.NewResourceExpired("too old resource version")
	refused := fmt.Errorf("dial tcp 127.0.0.1:6443: connect: %w", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		name      string
		watch     func(n int) (watch.Interface, error)
		expiredOn int  // the watch that gets the 410
		backoff   bool // the list waits a backoff after it
	}{
		{"refused, then a 410 status", func(n int) (watch.Interface, error) {
			switch n {
			case 1, 2:
				return nil, refused
			case 3:
				return nil, expired
			}
			return watch.NewRaceFreeFake(), nil
		}, 3, false},
		{"a failed watch, then a 410 event", func(n int) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			switch n {
			case 1:
				w.Error(&apierrors.NewInternalError(errors.New("etcd is unhappy")).ErrStatus)
			case 2:
				w.Error(&expired.ErrStatus)
			}
			return w, nil
		}, 2, false},
		{"closed normally, then a 410 event", func(n int) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			switch n {
			case 1:
				// Closed by the server after 5 s (not a very short watch,
				// which counts as failed): re-watched at once.
				time.AfterFunc(5*time.Second, w.Stop)
			case 2:
				w.Error(&expired.ErrStatus)
			}
			return w, nil
		}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var watched []time.Time
				relisted := make(chan time.Time, 1)
				lw := &reflectortest.ScriptedLW{
					T: t,
					List: func(n int, _ metav1.ListOptions) (runtime.Object, error) {
						if n == 1 {
							relisted <- time.Now()
						}
						return reflectortest.PodList("200"), nil
					},
					Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
						mu.Lock()
						watched = append(watched, time.Now())
						mu.Unlock()
						if n == 0 {
							// The first watch, after the cold list, runs a
							// while and is closed by the server.
							w := watch.NewRaceFreeFake()
							time.AfterFunc(5*time.Second, w.Stop)
							return w, nil
						}
						return tc.watch(n)
					},
				}
				r := New(lw.ListWatch(), reflectortest.NewRecordingStore(), Options{
					ExpectedType:      &v1.Pod{},
					MinWatchTimeout:   time.Hour,
					WatchErrorHandler: func(context.Context, error) {},
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					r.Run(ctx)
				}()
				listed := <-relisted // virtual time passes the backoffs
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				if len(watched) <= tc.expiredOn {
					t.Fatalf("relisted after %d watches", len(watched))
				}
				if d := listed.Sub(watched[tc.expiredOn]); (d > 0) != tc.backoff {
					t.Errorf("relisted %v after the watch that got the 410, want a backoff: %v", d, tc.backoff)
				}
			})
		})
	}
}
