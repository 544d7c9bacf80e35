package cache

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// reporter calls the watch error handler on a goroutine that holds none of
// the informer's locks, as client-go's reflector does. It is for errors
// found under blockDeltas. Applying an event, a recovery's diff and a read
// of the store find such errors. The handler is the user's code. It may call
// back into the informer, whose AddEventHandler takes that lock. The handler
// is called at once, not when the lock is released. The holder may wait
// long under it. A failed read, for one, waits for the warm delivery's end
// before its retry.
//
// The handler sees these errors in the order they were reported. One
// goroutine calls it at a time. A report starts that goroutine when none
// runs, and it ends once no error is queued. The handler's context ends when
// the informer stops, as the reflector's does. RunWithContext returns only
// after the handler did (stop), as client-go's does.
type reporter struct {
	handler func(context.Context, error)
	ctx     context.Context // ends at stop
	cancel  context.CancelFunc
	drains  sync.WaitGroup

	mu       sync.Mutex
	queue    []queuedReport
	draining bool // a goroutine is calling the handler
	stopped  bool
}

type queuedReport struct {
	ctx context.Context
	err error
}

// newReporter returns a reporter whose handler's contexts end with ctx, or
// at stop.
func newReporter(ctx context.Context, handler func(context.Context, error)) *reporter {
	r := &reporter{handler: handler}
	r.ctx, r.cancel = context.WithCancel(ctx)
	return r
}

// report queues err for the handler and returns without waiting for it.
// The handler gets ctx's logger with the reporter's context. After stop the
// error is only logged, since client-go calls no handler once Run has
// returned.
func (r *reporter) report(ctx context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		klog.FromContext(ctx).Error(err, "Not reported to the watch error handler: the informer has stopped")
		return
	}
	r.queue = append(r.queue, queuedReport{klog.NewContext(r.ctx, klog.FromContext(ctx)), err})
	if !r.draining {
		r.draining = true
		r.drains.Add(1)
		go r.drain()
	}
}

// drain calls the handler for each queued error until none is left.
func (r *reporter) drain() {
	defer r.drains.Done()
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

// stop ends the handler's context, then waits until the handler has
// returned for every error queued. Later reports are only logged.
func (r *reporter) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.drains.Wait()
}
