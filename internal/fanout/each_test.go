package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEachCallsEveryIndexOnceWithinTheBound(t *testing.T) {
	const n, workers = 200, 4
	var inFlight, peak atomic.Int64
	seen := make([]atomic.Int64, n)
	err := Each(t.Context(), n, workers, func(_ context.Context, i int) error {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		seen[i].Add(1)
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Errorf("index %d called %d times, want once", i, c)
		}
	}
	if p := peak.Load(); p > workers {
		t.Errorf("%d calls in flight at once, want at most %d", p, workers)
	}
	if err := Each(t.Context(), 0, workers, func(context.Context, int) error { t.Error("called for n = 0"); return nil }); err != nil {
		t.Errorf("Each over nothing: %v", err)
	}
}

func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	const workers = 3
	// Every worker holds a call until the failing call has cancelled the
	// context: the others see the cancellation, and no call starts after.
	var (
		calls   atomic.Int64
		started sync.WaitGroup
	)
	started.Add(workers)
	err := Each(t.Context(), 1000, workers, func(ctx context.Context, i int) error {
		if calls.Add(1) > workers {
			t.Errorf("call %d started after the first error", i)
			return nil
		}
		started.Done()
		started.Wait()
		if i == 0 {
			return boom
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Errorf("Each = %v, want %v", err, boom)
	}
}

func TestEachReturnsTheParentsCauseWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var calls atomic.Int64
	err := Each(ctx, 1000, 2, func(context.Context, int) error { calls.Add(1); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Each on a cancelled context = %v, want %v", err, context.Canceled)
	}
	if c := calls.Load(); c >= 1000 {
		t.Errorf("%d calls on a cancelled context", c)
	}
}
