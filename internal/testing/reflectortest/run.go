package reflectortest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"
)

// Run calls run, a Reflector's Run, on a goroutine. The returned stop is
// also registered as t's cleanup, and does its work once. It cancels run's
// context and fails t unless run returns within a second. Then it calls
// after, such as a check that no goroutine of the reflector is left.
func Run(t testing.TB, run func(context.Context), after func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(time.Second):
				t.Fatal("Run did not return within 1s of cancel")
			}
			after()
		})
	}
	t.Cleanup(stop)
	return stop
}

// Equal fails t, without stopping it, unless got deeply equals want. what
// names the compared value in the failure.
func Equal[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}
