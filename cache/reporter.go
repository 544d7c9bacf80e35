package cache

import (
	"context"
	"sync"
)

// reporter calls the watch error handler on a goroutine that holds none of
// the informer's locks, as client-go's reflector does. It is for errors
// found under blockDeltas (applying an event, a recovery's diff, a read of
// the store), and the handler is the user's code: it may call back into
// the informer, whose AddEventHandler takes that lock. The handler is
// called at once, not when the lock is released, because the holder may
// wait long under it: a failed read waits for the warm delivery's end
// before its retry.
//
// The handler sees these errors in the order they were reported. One
// goroutine calls it at a time, started by a report when none runs and
// ending once no error is queued, so a stopped informer leaves none
// behind.
type reporter struct {
	handler func(context.Context, error)

	mu       sync.Mutex
	queue    []queuedReport
	draining bool // a goroutine is calling the handler
}

type queuedReport struct {
	ctx context.Context
	err error
}

func newReporter(handler func(context.Context, error)) *reporter {
	return &reporter{handler: handler}
}

// report queues err for the handler and returns without waiting for it.
func (r *reporter) report(ctx context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, queuedReport{ctx, err})
	if !r.draining {
		r.draining = true
		go r.drain()
	}
}

// drain calls the handler for each queued error until none is left.
func (r *reporter) drain() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.draining = false
			r.mu.Unlock()
			return
		}
		next := r.queue[0]
		r.queue[0] = queuedReport{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
		r.handler(next.ctx, next.err)
	}
}
