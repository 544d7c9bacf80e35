package fanout

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls fn(ctx, i) for every i in [0, n) on min(workers, n) goroutines
// (at least one) and returns the first error a call returned. After that
// error, or once ctx is done, no new call starts, and the calls in flight
// see a cancelled context. If ctx ended before every call had started and
// none failed, Each returns ctx's cause; if every call ran and returned nil,
// Each returns nil whatever became of ctx meanwhile.
func Each(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var failed, skipped atomic.Bool
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(workers, 1), n) {
		wg.Go(func() {
			for i := range next {
				// The feeder's select may hand out an index after the
				// cancellation (both cases ready): it is not started.
				if ctx.Err() != nil {
					skipped.Store(true)
					continue
				}
				if err := fn(ctx, i); err != nil {
					// The first cancel sets the cause: the error returned.
					failed.Store(true)
					cancel(err)
				}
			}
		})
	}
	started := 0
feed:
	for ; started < n && ctx.Err() == nil; started++ {
		select {
		case next <- started:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if failed.Load() || skipped.Load() || started < n {
		return context.Cause(ctx)
	}
	return nil
}
