package reflectortest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// RecordingObserver records the calls of a reflector.Observer as strings:
// "resumed 5", "listed cold 10 items=2 pages=1", "watch 10", "ended ok".
// C is reflector.StartCause, which this package cannot import.
type RecordingObserver[C any] struct {
	// mu guards events.
	mu     sync.Mutex
	events []string
}

// Add records event s, for a test's observer that records more calls.
func (o *RecordingObserver[C]) Add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, s)
}

func (o *RecordingObserver[C]) Resumed(rv string) { o.Add("resumed " + rv) }

func (o *RecordingObserver[C]) Listed(c C, rv string, items, pages int) {
	o.Add(fmt.Sprintf("listed %v %s items=%d pages=%d", c, rv, items, pages))
}

func (o *RecordingObserver[C]) WatchStarted(rv string) { o.Add("watch " + rv) }

// WatchEnded records "ended ok" for a nil error, else "ended error".
func (o *RecordingObserver[C]) WatchEnded(err error) {
	if err == nil {
		o.Add("ended ok")
		return
	}
	o.Add("ended error")
}

// Events returns a copy of every event recorded so far, in order.
func (o *RecordingObserver[C]) Events() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// Starts returns only the Resumed and Listed calls: the StartCause history.
func (o *RecordingObserver[C]) Starts() []string {
	var out []string
	for _, e := range o.Events() {
		if strings.HasPrefix(e, "resumed ") || strings.HasPrefix(e, "listed ") {
			out = append(out, e)
		}
	}
	return out
}

// ErrorRecorder records the errors a reflector reports to its
// WatchErrorHandler. Its zero value is ready to use.
type ErrorRecorder struct {
	// mu guards errs.
	mu   sync.Mutex
	errs []error
}

// Handle is a reflector's WatchErrorHandler: it records err.
func (e *ErrorRecorder) Handle(_ context.Context, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

// Errors returns a copy of every error recorded so far, in order.
func (e *ErrorRecorder) Errors() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.errs)
}

// CheckNone fails t, without stopping it, if any error was recorded.
func (e *ErrorRecorder) CheckNone(t testing.TB) {
	t.Helper()
	if errs := e.Errors(); len(errs) > 0 {
		t.Errorf("unexpected errors reported: %v", errs)
	}
}
