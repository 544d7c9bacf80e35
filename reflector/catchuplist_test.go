package reflector

import (
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/watch"
)

// A list at a given version (ListFrom, after the store had part of its
// state set aside) may be served by a watch cache that lags: its data may
// be older than the server's state at the start. So it is no read made
// after the start, and its version is not the catch-up's target: the
// consistent read the next short watch takes is. The list's version was
// the target when no read had succeeded yet, and an informer resuming a
// collection that owed a list reported synced with a store older than its
// start (the simulation's seed 873).
func TestCatchUpTargetIsNotAListAtAVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := catchUpLW(t, "150", "100", nil, nil) // the list at 100 is served at 100
		done := make(chan struct{})
		tg := &target{}
		h := newHarness(t, lw.listWatch(), func(o *Options) {
			o.ListFrom = "100"
			o.CatchUp = &CatchUp{Target: tg.set, Done: done}
		})
		stop := runInBubble(h.r)
		w := lw.watcher(t, 0)
		synctest.Wait()
		equal(t, "targets", tg.get(), []string{"150"})
		w.Action(watch.Bookmark, pod("", "150"))
		synctest.Wait()
		close(done)
		stop()
		equal(t, "starts", h.obs.Starts(), []string{"listed relist-error 100 items=2 pages=1"})
		equal(t, "first watch timeout (short: still catching up)", *lw.WatchOpts()[0].TimeoutSeconds, int64(3))
	})
}
