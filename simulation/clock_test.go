package simulation

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// virtualClock is the informer's clock in the seeds that run client-go's
// backoff (800 ms doubling to 30 s): time stands still until the driver,
// waiting for the informer, moves it to the next timer's deadline. A
// backoff then costs one poll of the driver instead of its duration. Firing
// a timer early in real time is what a slow machine does, so every
// schedule it makes is one a real informer can meet.
type virtualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*virtualTimer // armed, in no order
}

var _ clock.WithTicker = (*virtualClock)(nil)

func newVirtualClock() *virtualClock {
	return &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// virtualTimer is a timer or, with a period, a ticker.
type virtualTimer struct {
	c        *virtualClock
	ch       chan time.Time // capacity 1; a tick nobody took is dropped
	deadline time.Time
	period   time.Duration
	armed    bool // guarded by c.mu
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *virtualClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (c *virtualClock) NewTimer(d time.Duration) clock.Timer { return c.arm(d, 0) }

func (c *virtualClock) Tick(d time.Duration) <-chan time.Time { return c.NewTicker(d).C() }

func (c *virtualClock) NewTicker(d time.Duration) clock.Ticker { return virtualTicker{c.arm(d, d)} }

// virtualTicker is a periodic virtualTimer.
type virtualTicker struct{ t *virtualTimer }

func (t virtualTicker) C() <-chan time.Time { return t.t.ch }

func (t virtualTicker) Stop() { t.t.Stop() }

// Sleep returns at once: nothing in the informer sleeps on its clock, and
// virtual time passes only when the driver moves it.
func (c *virtualClock) Sleep(time.Duration) {}

func (c *virtualClock) arm(d, period time.Duration) *virtualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &virtualTimer{c: c, ch: make(chan time.Time, 1), period: period}
	t.resetLocked(d)
	return t
}

func (t *virtualTimer) resetLocked(d time.Duration) bool {
	was := t.armed
	t.deadline = t.c.now.Add(max(d, 0))
	if !t.armed {
		t.armed = true
		t.c.timers = append(t.c.timers, t)
	}
	return was
}

func (t *virtualTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer; true if it was armed.
func (t *virtualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stopLocked()
}

func (t *virtualTimer) stopLocked() bool {
	if !t.armed {
		return false
	}
	t.armed = false
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	return true
}

func (t *virtualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.resetLocked(d)
}

// AdvanceToNext moves time to the earliest armed deadline and fires every
// timer due by then; false if none is armed.
func (c *virtualClock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].deadline.Before(c.timers[j].deadline) })
	if next := c.timers[0].deadline; next.After(c.now) {
		c.now = next
	}
	var due []*virtualTimer
	for _, t := range c.timers {
		if !t.deadline.After(c.now) {
			due = append(due, t)
		}
	}
	for _, t := range due {
		select {
		case t.ch <- c.now:
		default:
		}
		if t.period > 0 {
			t.deadline = c.now.Add(t.period)
		} else {
			t.stopLocked()
		}
	}
	return true
}
