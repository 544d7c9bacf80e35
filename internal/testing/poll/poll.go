// Package poll is the tests' one helper for waiting on a condition that no
// event signals, such as a store's contents or a counter reaching a value.
// Prefer a channel or testing/synctest where the code under test offers one;
// poll only checks cond repeatedly and never decides on its own that
// something did not happen.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// Interval bounds between two checks of a condition: the first wait is
// minInterval, each next one twice as long, up to maxInterval.
const (
	minInterval = time.Millisecond
	maxInterval = 50 * time.Millisecond
)

// Wait calls cond until it returns true, and returns nil then, or an error
// once timeout has passed with cond still false. cond is called at least
// once, and once more after the deadline, so a slow machine is not failed
// for a condition that became true while it waited.
func Wait(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	interval := minInterval
	for !cond() {
		if time.Now().After(deadline) {
			if cond() {
				return nil
			}
			return fmt.Errorf("condition not met within %v", timeout)
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
	return nil
}

// Until is Wait that fails t (t.Fatalf, naming what) on timeout. Call it
// only from the test's goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Wait(timeout, cond); err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}
