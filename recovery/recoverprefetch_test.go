package recovery

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// page is a metadata list page at rv of pods, continued by next ("" for
// the last page).
func page(rv, next string, pods ...*v1.Pod) *metav1.PartialObjectMetadataList {
	l := metaList(rv, pods...)
	l.Continue = next
	return l
}

// await waits for ch, failing the test after 5 s.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Errorf("timed out waiting for %s", what)
	}
}

// secondPageFails scripts metadata lists: first as the first page; err
// for the second, once fetched (the first page's change) is closed; and
// then, for every list after, after.
func secondPageFails(t *testing.T, first *metav1.PartialObjectMetadataList, fetched <-chan struct{}, err error, after *metav1.PartialObjectMetadataList) func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return func(n int, _ metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		switch n {
		case 0:
			return first.DeepCopy(), nil
		case 1:
			await(t, fetched, "the fetch of the first page's change")
			return nil, err
		}
		return after.DeepCopy(), nil
	}
}

// The changed objects of the pages before the last are fetched while the
// rest of the list is read, before the diff and before the watch opens, at
// least as new as the list; they are applied once the watch has opened, in
// key order, and the last page's changes are fetched after them. Nothing
// is fetched twice.
func TestRecoveryFetchesWhileListing(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud", "4"))
	onServer := []*v1.Pod{upod("ns", "a", "ua", "5"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "6"), upod("ns", "d", "ud", "7")}
	prefetched := make(chan struct{}) // a and c fetched
	watchOpened := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	early := map[string]bool{} // fetched before the watch opened
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			switch n {
			case 0:
				return page("10", "p1", onServer[0], onServer[1]), nil
			case 1:
				return page("10", "p2", onServer[2]), nil
			}
			// The last page waits for the first pages' fetches: they
			// overlap the list.
			await(t, prefetched, "the fetches of the first pages' changes before the list's last page")
			return page("10", "", onServer[3]), nil
		},
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			select {
			case <-watchOpened:
			default:
				early[name] = true
			}
			seen = append(seen, name)
			if len(seen) == 2 {
				close(prefetched)
			}
			mu.Unlock()
			return server("10", onServer...)(ctx, ns, name, opts)
		},
	}
	h := startRecovery(t, store, lister, "4", func(o *Options, lw *fakeLW) {
		lw.signalWatch(watchOpened)
	})
	store.waitFor(t, "end@10")
	h.stop()

	equal(t, "fetches", lister.Fetches(), []string{"ns/a@10", "ns/c@10", "ns/d@10"})
	equal(t, "fetched before the watch opened", early, map[string]bool{"a": true, "c": true})
	equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@5", "update ns/c@6", "update ns/d@7", "end@10"})
	stats := h.obs.Stats()
	if len(stats) != 1 {
		t.Fatalf("recovered %d times, want once", len(stats))
	}
	s := stats[0]
	s.Duration, s.ListDuration = 0, 0
	equal(t, "stats", s, RecoveryStats{Listed: 4, Pages: 3, Unchanged: 1, Fetch: 3, Requests: 3, Fetched: 3, Decoded: 3})
	noErrors(t, &harness{errs: h.errs})
}

// A list whose continue token expired is made again in one request, at a
// newer resourceVersion: what was fetched against the first one may be
// older than the new list, and is not applied.
func TestRecoveryDropsPrefetchesOfAnExpiredList(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	prefetched := make(chan struct{})
	var once sync.Once
	lister := &fakeLister{
		meta: secondPageFails(t, page("10", "p1", upod("ns", "a", "ua", "5")), prefetched,
			apierrors.NewResourceExpired("continue token expired"), metaList("11", upod("ns", "a", "ua", "8"), upod("ns", "b", "ub", "2"))),
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.ResourceVersion == "10" {
				defer once.Do(func() { close(prefetched) })
				return server("10", upod("ns", "a", "ua", "5"))(ctx, ns, name, opts)
			}
			return server("11", upod("ns", "a", "ua", "8"))(ctx, ns, name, opts)
		},
	}
	h := startRecovery(t, store, lister, "2", nil)
	store.waitFor(t, "end@11")
	h.stop()
	equal(t, "fetches", lister.Fetches(), []string{"ns/a@10", "ns/a@11"})
	equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@8", "end@11"})
}

// A metadata list that fails after its first page stops the fetches it
// started (their requests are canceled); the next recovery starts over.
func TestRecoveryPrefetchStoppedWithTheList(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"))
	started, canceled := make(chan struct{}), make(chan struct{})
	var first sync.Once
	lister := &fakeLister{
		meta: secondPageFails(t, page("10", "p1", upod("ns", "a", "ua", "5")), started,
			apierrors.NewInternalError(errors.New("boom")), metaList("10", upod("ns", "a", "ua", "5"))),
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (runtime.Object, error) {
			held := false
			first.Do(func() { held = true })
			if held {
				close(started)
				<-ctx.Done()
				close(canceled)
				return nil, ctx.Err()
			}
			return server("10", upod("ns", "a", "ua", "5"))(ctx, ns, name, opts)
		},
	}
	h := startRecovery(t, store, lister, "1", nil)
	await(t, canceled, "the fetch's cancellation")
	store.waitFor(t, "end@10")
	h.stop()
	equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@5", "end@10"})
}

// admit lets through a page's changed keys while the bounds hold: fewer
// than FullListFraction of what was listed changed, within the request
// budget, and
// every resourceVersion an integer; once one is passed, nothing more.
func TestPrefetchAdmits(t *testing.T) {
	item := func(ns, name, rv string) wireItem { return wireItem{namespace: ns, name: name, resourceVersion: rv} }
	for _, tc := range []struct {
		name   string
		cfg    testRecovery
		budget int
		pages  [][]wireItem
		want   [][]string
	}{
		{"changed only", testRecovery{FullListFraction: 2}, 0,
			[][]wireItem{{item("x", "a", "11"), item("x", "b", "10"), item("y", "c", "3")}, {item("y", "d", "12")}},
			[][]string{{"x/a"}, {"y/d"}}},
		{"until a fraction changed", testRecovery{FullListFraction: 0.5}, 0,
			[][]wireItem{{item("x", "a", "11"), item("x", "b", "5"), item("x", "c", "5")}, {item("x", "d", "12"), item("x", "e", "13")}, {item("x", "f", "14"), item("x", "g", "1"), item("x", "h", "1"), item("x", "i", "1")}},
			[][]string{{"x/a"}, nil, nil}},
		{"within the budget", testRecovery{FullListFraction: 2}, 2,
			[][]wireItem{{item("x", "a", "11"), item("x", "b", "12"), item("x", "c", "13")}, {item("x", "d", "14")}},
			[][]string{{"x/a", "x/b"}, nil}},
		{"resourceVersions that are not integers", testRecovery{FullListFraction: 2}, 0,
			[][]wireItem{{item("x", "a", "11"), item("x", "b", "b1")}, {item("x", "c", "12")}},
			[][]string{nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &prefetch{r: &Recoverer{cfg: tc.cfg.config()}, storedN: 10, budget: tc.budget}
			for i, items := range tc.pages {
				equal(t, "page "+string(rune('0'+i)), p.admit(items), tc.want[i])
			}
		})
	}
}
