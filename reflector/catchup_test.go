package reflector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// catchUpLW answers the consistent limit=1 read at "" with readRV (or
// readErr) and any other list with a full list at listRV.
func catchUpLW(t *testing.T, readRV, listRV string, readErr func(n int) error, watchFn func(n int, opts metav1.ListOptions) (watch.Interface, error)) *reflectortest.ScriptedLW {
	reads := 0
	return &reflectortest.ScriptedLW{
		T: t,
		List: func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				reads++
				if readErr != nil {
					if err := readErr(reads); err != nil {
						return nil, err
					}
				}
				return reflectortest.PodList(readRV, reflectortest.Pod("a", "5")), nil
			}
			return reflectortest.PodList(listRV, reflectortest.Pod("a", "5"), reflectortest.Pod("b", "6")), nil
		},
		Watch: watchFn,
	}
}

// runInBubble runs r until the returned stop is called; stop waits for Run
// to return. Inside a synctest bubble that also proves no goroutine of the
// reflector outlives Run.
func runInBubble(r *Reflector) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

type target struct {
	mu sync.Mutex
	rv []string
}

func (tg *target) set(rv string) { tg.mu.Lock(); tg.rv = append(tg.rv, rv); tg.mu.Unlock() }
func (tg *target) get() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]string(nil), tg.rv...)
}

// A resuming reflector with CatchUp watches from the resume point with
// 3-second watches until Done is closed, taking the consistent read once
// each such watch has opened (not before: see CatchUp), and with ordinary
// watches after that; it never lists.
func TestCatchUpReadsAfterShortWatchOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := catchUpLW(t, "150", "", nil, nil)
		done := make(chan struct{})
		tg := &target{}
		h := newHarness(t, lw.ListWatch(), func(o *Options) {
			o.ResumeResourceVersion = "100"
			o.CatchUp = &CatchUp{Target: tg.set, Done: done}
		})
		stop := runInBubble(h.r)
		w := lw.Watcher(t, 0)
		synctest.Wait()
		reflectortest.Equal(t, "targets", tg.get(), []string{"150"})
		w.Action(watch.Bookmark, reflectortest.Pod("", "150"))
		synctest.Wait()
		close(done) // the store has applied 150
		time.Sleep(3 * time.Second)
		w.Stop() // the server ends the watch at its timeout
		synctest.Wait()
		lw.Watcher(t, 1)
		stop()

		opts := lw.WatchOpts()
		reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "150"})
		reflectortest.Equal(t, "first watch timeout", *opts[0].TimeoutSeconds, int64(3))
		if got := *opts[1].TimeoutSeconds; got < 300 {
			t.Errorf("watch after catching up has timeoutSeconds %d, want the ordinary >= 300", got)
		}
		reflectortest.Equal(t, "lists", len(lw.ListOpts()), 1) // the limit=1 read only
		reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100"})
		h.errs.CheckNone(t)
	})
}

// Short watches that do not bring the store up to the read (the server
// sends no bookmarks, or sends them behind the read) end in a relist with a
// consistent read after MaxWatches of them, each with its own read. A
// server that ignores timeoutSeconds is cut off by the reflector itself.
func TestCatchUpRelistsAfterMaxWatches(t *testing.T) {
	for _, serverCloses := range []bool{true, false} {
		name := "server closes at timeout"
		if !serverCloses {
			name = "server ignores the timeout"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lw := catchUpLW(t, "150", "160", nil, nil)
				done := make(chan struct{})
				tg := &target{}
				h := newHarness(t, lw.ListWatch(), func(o *Options) {
					o.ResumeResourceVersion = "100"
					o.CatchUp = &CatchUp{Target: tg.set, Done: done, MaxWatches: 2}
				})
				stop := runInBubble(h.r)
				for i := range 2 {
					w := lw.Watcher(t, i)
					w.Action(watch.Bookmark, reflectortest.Pod("", "140")) // behind the read
					if serverCloses {
						time.Sleep(3 * time.Second)
						w.Stop()
					} else {
						time.Sleep(3*time.Second + catchUpGrace)
					}
					synctest.Wait()
				}
				lw.Watcher(t, 2)
				stop()

				reflectortest.Equal(t, "targets", tg.get(), []string{"150"})
				var reads, full []string
				for _, o := range lw.ListOpts() {
					if o.Limit == 1 {
						reads = append(reads, o.ResourceVersion)
					} else {
						full = append(full, o.ResourceVersion)
					}
				}
				reflectortest.Equal(t, "full list RVs", full, []string{""})
				// A read when each watch opens and every half second after.
				if len(reads) < 2*int(3*time.Second/catchUpReadInterval) {
					t.Errorf("%d consistent reads in two 3-second watches, want one every %v", len(reads), catchUpReadInterval)
				}
				reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100", "listed relist-catchup 160 items=2 pages=1"})
				reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "140", "160"})
				reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"bookmark@140", "bookmark@140", "replace 2@160"})
			})
		})
	}
}

// A failed read is reported and taken again with the next short watch; the
// resume goes on meanwhile.
func TestCatchUpReadFailureRetriedWithNextWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unreachable := errors.New("connection refused")
		lw := catchUpLW(t, "150", "", func(n int) error {
			if n == 1 {
				return unreachable
			}
			return nil
		}, nil)
		tg := &target{}
		h := newHarness(t, lw.ListWatch(), func(o *Options) {
			o.ResumeResourceVersion = "100"
			o.CatchUp = &CatchUp{Target: tg.set, Done: make(chan struct{})}
		})
		stop := runInBubble(h.r)
		w := lw.Watcher(t, 0)
		synctest.Wait()
		reflectortest.Equal(t, "targets after the failed read", tg.get(), []string(nil))
		time.Sleep(3 * time.Second)
		w.Stop()
		lw.Watcher(t, 1)
		synctest.Wait()
		stop()
		errs := h.errs.Errors()
		if len(errs) != 1 || !errors.Is(errs[0], ErrList) || !errors.Is(errs[0], unreachable) {
			t.Errorf("reported %v, want the failed read as ErrList", errs)
		}
		reflectortest.Equal(t, "targets", tg.get(), []string{"150"})
		reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"resumed 100"})
		reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "100"})
	})
}

// A relist after a 410 while catching up is not the catch-up's target.
// It asks for data no older than the stored version, which a watch cache
// behind etcd serves at its position (120 here), older than the server
// at the start (150): a store synced on it would miss what changed in
// between. The consistent read's version is the target; with the reads
// failing, the relist at "" that the short watches end in is.
func TestCatchUpRelistAfterExpiredIsNotTheTarget(t *testing.T) {
	pods := []*v1.Pod{reflectortest.Pod("a", "5"), reflectortest.Pod("b", "6")}
	for _, readsFail := range []bool{false, true} {
		t.Run(fmt.Sprintf("reads fail %v", readsFail), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				list := servedAs(t, "150", "120", pods)
				lw := &reflectortest.ScriptedLW{T: t,
					List: func(n int, opts metav1.ListOptions) (runtime.Object, error) {
						if readsFail && opts.Limit == 1 {
							return nil, fmt.Errorf("connection reset by peer")
						}
						return list(n, opts)
					},
					Watch: func(n int, opts metav1.ListOptions) (watch.Interface, error) {
						if n == 0 {
							// Refused at its start: no read follows it.
							return nil, apierrors.NewResourceExpired("too old resource version: 100 (140)")
						}
						return serverTimesOut(n, opts)
					},
				}
				h, store := newCatchUpHarness(t, lw, 2, nil)
				stop := runInBubble(h.r)
				defer stop()
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				stop()

				// The read's, or the relist's at "" after MaxWatches.
				reflectortest.Equal(t, "targets", store.Targets(), []string{"150"})
				full := fullLists(lw)
				reflectortest.Equal(t, "first full list", head(full, 1), []string{"100"})
				if readsFail {
					reflectortest.Equal(t, "full lists", full, []string{"100", ""})
				}
			})
		})
	}
}

// listedEarlier relists by reporting a consistent list made before the
// relist, as a recovery reports the list its informer gave it.
type listedEarlier struct{ rv string }

func (e listedEarlier) Relist(_ context.Context, l *Relist) (*Relisted, error) {
	l.ListedEarlier(e.rv, 0, 1)
	return &Relisted{}, nil
}

// A consistent list made before the relist that reports it may predate
// the reads: it gives the catch-up its target, and settles it, only if no
// read gave one before. After a read at 150, a list made earlier at 120
// leaves the watches short. With no read, or a caller that knows its
// target (Target nil), it is what the reflector knows.
func TestCatchUpListedEarlierSettlesOnlyAsTheTarget(t *testing.T) {
	for _, tc := range []struct {
		name        string
		read        bool // the first watch opens and its read succeeds
		knownTarget bool // Target nil: the caller got its target elsewhere
		targets     []string
		settled     bool
	}{
		{name: "after a read", read: true, targets: []string{"150"}},
		{name: "before any read", targets: []string{"120"}, settled: true},
		{name: "caller knows its target", knownTarget: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lw := catchUpLW(t, "150", "", nil, func(n int, opts metav1.ListOptions) (watch.Interface, error) {
					if n > 0 {
						return serverTimesOut(n, opts)
					}
					if !tc.read {
						return nil, apierrors.NewResourceExpired("too old resource version: 100 (110)")
					}
					return watch.NewRaceFreeFake(), nil
				})
				h, store := newCatchUpHarness(t, lw, 0, func(o *Options) {
					o.Relister = listedEarlier{rv: "120"}
					if tc.knownTarget {
						o.CatchUp.Target = nil
					}
				})
				stop := runInBubble(h.r)
				defer stop()
				if tc.read {
					w := lw.Watcher(t, 0)
					synctest.Wait() // the read has given the target
					w.Error(&expiredStatus)
				}
				lw.Watcher(t, 1)
				synctest.Wait()
				stop()

				reflectortest.Equal(t, "targets", store.Targets(), tc.targets)
				opts := lw.WatchOpts()
				reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"100", "120"})
				if short := *opts[1].TimeoutSeconds == 3; short == tc.settled {
					t.Errorf("the watch after the list made earlier has timeoutSeconds %d; settled %v, want %v",
						*opts[1].TimeoutSeconds, !short, tc.settled)
				}
			})
		})
	}
}
