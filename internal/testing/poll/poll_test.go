package poll

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestWaitReturnsOnceCondHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		go func() {
			time.Sleep(30 * time.Millisecond)
			n.Store(1)
		}()
		start := time.Now()
		if err := Wait(time.Second, func() bool { return n.Load() == 1 }); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 30*time.Millisecond || d > 100*time.Millisecond {
			t.Errorf("Wait returned after %v, want soon after 30ms", d)
		}
	})
}

func TestWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		err := Wait(time.Second, func() bool { calls++; return false })
		if err == nil {
			t.Fatal("Wait returned nil for a condition that never holds")
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("Wait gave up after %v, before its 1s timeout", d)
		}
		if calls < 2 {
			t.Errorf("cond called %d times", calls)
		}
	})
}
