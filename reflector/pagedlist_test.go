package reflector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// recPages is a PagedList that records what it is given; store, if set, is
// the reflector's Store, which must not have been written to meanwhile.
type recPages struct {
	t     *testing.T
	store *reflectortest.RecordingStore
	mu    sync.Mutex
	calls []string
}

func (p *recPages) ListPage(_ context.Context, items []interface{}) error {
	names := make([]string, len(items))
	for i, obj := range items {
		name, rv := reflectortest.NameRV(obj)
		names[i] = name + "@" + rv
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, "page "+strings.Join(names, ","))
	if p.store != nil && len(p.store.Calls()) > 0 {
		p.t.Errorf("the Store was written to before a page: %v", p.store.Calls())
	}
	return nil
}

func (p *recPages) ListDone(_ context.Context, rv string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, "done@"+rv)
	return nil
}

func (p *recPages) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// A cold start with a PagedList lists as a consistent read in pages and
// hands each page over as it arrives, then the list's resourceVersion, and
// watches from it; the Store's Replace is never called.
func TestPagedListHandsPagesOver(t *testing.T) {
	var pods []*v1.Pod
	for i := range 5 {
		pods = append(pods, reflectortest.Pod(fmt.Sprintf("p%d", i), strconv.Itoa(i+1)))
	}
	lw := &reflectortest.ScriptedLW{T: t, List: pagedList("10", pods)}
	pages := &recPages{t: t}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = 2; o.PagedList = pages })
	pages.store = h.store
	stop := h.run()
	lw.Watcher(t, 0)
	stop()

	reflectortest.Equal(t, "list options", lw.ListOpts(), []metav1.ListOptions{
		{ResourceVersion: "", Limit: 2},
		{Limit: 2, Continue: "2"},
		{Limit: 2, Continue: "4"},
	})
	reflectortest.Equal(t, "pages", pages.Calls(), []string{"page p0@1,p1@2", "page p2@3,p3@4", "page p4@5", "done@10"})
	reflectortest.Equal(t, "store calls", h.store.Calls(), []string(nil))
	reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed cold 10 items=5 pages=3"})
	reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"10"})
	reflectortest.Equal(t, "last sync RV", h.r.LastSyncResourceVersion(), "10")
	h.errs.CheckNone(t)
}

// Without Options.PageSize a paged list asks for DefaultPagedListPageSize
// items a page.
func TestPagedListDefaultPageSize(t *testing.T) {
	lw := &reflectortest.ScriptedLW{T: t, List: pagedList("7", []*v1.Pod{reflectortest.Pod("a", "1")})}
	pages := &recPages{t: t}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PagedList = pages })
	stop := h.run()
	lw.Watcher(t, 0)
	stop()
	reflectortest.Equal(t, "list options", lw.ListOpts(), []metav1.ListOptions{{ResourceVersion: "", Limit: DefaultPagedListPageSize}})
	reflectortest.Equal(t, "pages", pages.Calls(), []string{"page a@1", "done@7"})
}

// A paged list that fails part-way (here its continue token expired) is
// reported, and the next list is an ordinary one through Store.Replace,
// which a store reconciles with the pages it was given. A Relister is not
// asked for it: nothing the store holds is at a resourceVersion to
// recover from, and the informer's cold start is synced by that Replace.
func TestPagedListFailingPartWayListsAgainWhole(t *testing.T) {
	for _, withRelister := range []bool{false, true} {
		t.Run(fmt.Sprintf("relister %v", withRelister), func(t *testing.T) {
			var pods []*v1.Pod
			for i := range 5 {
				pods = append(pods, reflectortest.Pod(fmt.Sprintf("p%d", i), strconv.Itoa(i+1)))
			}
			pager := pagedList("10", pods)
			lw := &reflectortest.ScriptedLW{T: t, List: func(n int, opts metav1.ListOptions) (runtime.Object, error) {
				if n == 1 {
					return nil, apierrors.NewResourceExpired("continue token expired")
				}
				return pager(n, opts)
			}}
			pages := &recPages{t: t}
			relister := &countingRelister{}
			h := newHarness(t, lw.ListWatch(), func(o *Options) {
				o.PageSize = 2
				o.PagedList = pages
				if withRelister {
					o.Relister = relister
				}
			})
			stop := h.run()
			lw.Watcher(t, 0)
			stop()

			reflectortest.Equal(t, "pages", pages.Calls(), []string{"page p0@1,p1@2"})
			reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 5@10"})
			reflectortest.Equal(t, "relists", int(relister.calls.Load()), 0)
			if errs := h.errs.Errors(); len(errs) != 1 || !errors.Is(errs[0], ErrList) {
				t.Errorf("errors reported: %v, want one ErrList", errs)
			}
			reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed cold 10 items=5 pages=3"})
			rvs := lw.ListRVs()
			if len(rvs) < 3 || rvs[0] != "" || rvs[2] != "" {
				t.Errorf("list resourceVersions %q: want the paged list at \"\", then an ordinary one at \"\" (a consistent read)", rvs)
			}
		})
	}
}

// countingRelister counts its calls and has the reflector list in full.
type countingRelister struct{ calls atomic.Int32 }

func (c *countingRelister) Relist(context.Context, *Relist) (*Relisted, error) {
	c.calls.Add(1)
	return nil, ErrFullList
}

// failingPages is a PagedList whose ListPage fails at call failAt (from 0).
type failingPages struct {
	recPages
	failAt int
	n      int // ListPage calls so far; the reflector's goroutine only
}

func (p *failingPages) ListPage(ctx context.Context, items []interface{}) error {
	n := p.n
	p.n++
	if n == p.failAt {
		return errors.New("the store refused the page")
	}
	return p.recPages.ListPage(ctx, items)
}

// The list that follows a paged list's failure is a consistent read,
// whatever ended it. A lagging watch cache may serve a list at "0" older
// than the pages: the store and its handlers would go back in time. With
// no page handed over, a list at "0" would sync the informer on the
// cache's past, where the paged list promised a consistent read.
func TestPagedListFailingPartWayNeverListsOlder(t *testing.T) {
	// The pages: a snapshot at 10. The watch cache lags: at "0" it serves
	// a snapshot at 5, in which p0 and p1 are older than the pages gave.
	newer := []*v1.Pod{reflectortest.Pod("p0", "8"), reflectortest.Pod("p1", "9"), reflectortest.Pod("p2", "10")}
	older := []*v1.Pod{reflectortest.Pod("p0", "1"), reflectortest.Pod("p1", "2")}
	expired := apierrors.NewResourceExpired("continue token expired")
	dropped := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name string
		// failList answers the n-th list request (from 0) with an error, or
		// nil to serve it; failPage makes the PagedList refuse a page (-1:
		// never).
		failList func(n int) error
		failPage int
		// handedOver is what the PagedList got before the failure.
		handedOver []string
		wantRV     string // the resourceVersion the next list asks for
	}{
		{"continue token expired", func(n int) error { return map[int]error{1: expired}[n] }, -1, []string{"page p0@8,p1@9"}, ""},
		{"connection dropped at the second page", func(n int) error { return map[int]error{1: dropped}[n] }, -1, []string{"page p0@8,p1@9"}, ""},
		{"store refused the second page", func(int) error { return nil }, 1, []string{"page p0@8,p1@9"}, ""},
		// A page the PagedList refused may be applied in part.
		{"store refused the first page", func(int) error { return nil }, 0, nil, ""},
		{"connection dropped at the first page", func(n int) error { return map[int]error{0: dropped}[n] }, -1, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{T: t, List: func(n int, opts metav1.ListOptions) (runtime.Object, error) {
				if err := tc.failList(n); err != nil {
					return nil, err
				}
				if opts.ResourceVersion == "0" {
					return pagedList("5", older)(n, opts)
				}
				return pagedList("10", newer)(n, opts)
			}}
			pages := &failingPages{recPages: recPages{t: t}, failAt: tc.failPage}
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = 2; o.PagedList = pages })
			stop := h.run()
			lw.Watcher(t, 0)
			stop()

			reflectortest.Equal(t, "pages handed over", pages.Calls(), tc.handedOver)
			// The next list is the first request after the paged list's
			// first that continues nothing.
			opts := lw.ListOpts()
			next := slices.IndexFunc(tail(opts, 1), func(o metav1.ListOptions) bool { return o.Continue == "" })
			if len(opts) == 0 || opts[0].ResourceVersion != "" || next < 0 || opts[1+next].ResourceVersion != tc.wantRV {
				var got []string
				for _, o := range opts {
					got = append(got, fmt.Sprintf("rv=%q continue=%q", o.ResourceVersion, o.Continue))
				}
				t.Errorf("list requests %v: want the paged list at \"\", then an ordinary one at %q", got, tc.wantRV)
			}
			if tc.wantRV == "" {
				reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 3@10"})
				reflectortest.Equal(t, "store objects", h.store.Objects(), map[string]string{"p0": "8", "p1": "9", "p2": "10"})
			}
		})
	}
}

// blockingPages is a PagedList whose first ListPage returns only once the
// next page has been asked for, or fails after a minute or once ctx ends.
type blockingPages struct {
	recPages
	asked chan struct{}
}

func (p *blockingPages) ListPage(ctx context.Context, items []interface{}) error {
	if len(p.Calls()) == 0 {
		select {
		case <-p.asked:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("the next page was not asked for while the first was stored")
		}
	}
	return p.recPages.ListPage(ctx, items)
}

// The next page is asked for before the PagedList takes this one, so that
// the server's work and the store's overlap.
func TestPagedListAsksForTheNextPageWhileStoring(t *testing.T) {
	var pods []*v1.Pod
	for i := range 3 {
		pods = append(pods, reflectortest.Pod(fmt.Sprintf("p%d", i), strconv.Itoa(i+1)))
	}
	pager := pagedList("10", pods)
	asked := make(chan struct{})
	lw := &reflectortest.ScriptedLW{T: t, List: func(n int, opts metav1.ListOptions) (runtime.Object, error) {
		if n == 1 {
			close(asked)
		}
		return pager(n, opts)
	}}
	pages := &blockingPages{recPages: recPages{t: t}, asked: asked}
	h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = 2; o.PagedList = pages })
	stop := h.run()
	lw.Watcher(t, 0)
	stop()

	reflectortest.Equal(t, "pages", pages.Calls(), []string{"page p0@1,p1@2", "page p2@3", "done@10"})
	h.errs.CheckNone(t)
}
