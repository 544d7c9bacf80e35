package reflector

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// The shared fakes cannot assert these themselves: reflectortest must not
// import reflector, whose internal tests use it.
var (
	_ Store    = (*reflectortest.RecordingStore)(nil)
	_ Observer = (*reflectortest.RecordingObserver[StartCause])(nil)
)

// harness is a Reflector for pods with the shared recording fakes.
type harness struct {
	t     *testing.T
	store *reflectortest.RecordingStore
	obs   *reflectortest.RecordingObserver[StartCause]
	errs  *reflectortest.ErrorRecorder
	r     *Reflector
}

// newHarness builds a Reflector for *v1.Pod with millisecond backoffs, a
// recording Store, Observer and error handler; mutate adjusts the Options.
func newHarness(t *testing.T, lw cache.ListerWatcher, mutate func(*Options)) *harness {
	h := &harness{t: t, store: reflectortest.NewRecordingStore(), obs: &reflectortest.RecordingObserver[StartCause]{}, errs: &reflectortest.ErrorRecorder{}}
	opts := Options{
		ExpectedType:      &v1.Pod{},
		InitialBackoff:    time.Millisecond,
		MaxBackoff:        4 * time.Millisecond,
		Observer:          h.obs,
		WatchErrorHandler: h.errs.Handle,
	}
	if mutate != nil {
		mutate(&opts)
	}
	h.r = New(lw, h.store, opts)
	return h
}

// run starts Run on a goroutine. The returned stop (also registered as a
// cleanup) cancels it, requires it to return within a second, and checks
// that no reflector goroutine is left.
func (h *harness) run() (stop func()) {
	return reflectortest.Run(h.t, h.r.Run, func() { assertNoReflectorGoroutines(h.t) })
}

// tooLargeRV builds the "too large resource version" answer of current
// servers (a 504 Timeout with cause ResourceVersionTooLarge).
func tooLargeRV() *apierrors.StatusError {
	err := apierrors.NewTimeoutError("Too large resource version", 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// connRefused is the error a dial to a port nobody listens on returns.
func connRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// watchFailure is one way a watch fails, scripted on a fresh fake watcher.
type watchFailure struct {
	name string
	// fail returns what the n-th Watch call answers: a start error, or w
	// prepared to fail.
	fail func(w *watch.RaceFreeFakeWatcher) (watch.Interface, error)
	// cause recognizes the failure in the reported error.
	cause func(error) bool
	// retriable: client-go retries it without relisting (connection
	// refused, 429).
	retriable bool
}

// watchFailures are the failures a watch can meet, other than an expired
// or too-large resourceVersion.
func watchFailures() []watchFailure {
	boom := errors.New("boom")
	start := func(err error) func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) {
		return func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) { return nil, err }
	}
	inStream := func(s metav1.Status) func(*watch.RaceFreeFakeWatcher) (watch.Interface, error) {
		return func(w *watch.RaceFreeFakeWatcher) (watch.Interface, error) {
			w.Error(&s)
			return w, nil
		}
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "system:serviceaccount:ns:sa" cannot watch resource "pods"`))
	return []watchFailure{
		{"start: 403", start(forbidden), apierrors.IsForbidden, false},
		{"start: 401", start(apierrors.NewUnauthorized("token expired")), apierrors.IsUnauthorized, false},
		{"start: 500", start(apierrors.NewInternalError(boom)), apierrors.IsInternalError, false},
		{"start: 503", start(apierrors.NewServiceUnavailable("down")), apierrors.IsServiceUnavailable, false},
		{"start: plain error", start(boom), func(err error) bool { return errors.Is(err, boom) }, false},
		{"in-stream ERROR 500", inStream(apierrors.NewInternalError(boom).ErrStatus), apierrors.IsInternalError, false},
		{"very short watch", func(w *watch.RaceFreeFakeWatcher) (watch.Interface, error) {
			w.Stop() // closed before any event
			return w, nil
		}, func(err error) bool { return strings.Contains(err.Error(), "less than a second") }, false},
		{"start: connection refused", start(connRefused()), utilnet.IsConnectionRefused, true},
		{"start: 429", start(apierrors.NewTooManyRequests("slow down", 1)), apierrors.IsTooManyRequests, true},
		{"in-stream ERROR 429", inStream(apierrors.NewTooManyRequests("slow down", 1).ErrStatus), apierrors.IsTooManyRequests, true},
	}
}

// head returns the first n elements of s, or all of s if it is shorter, so
// that a test can compare a prefix without panicking on a short result.
func head[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// tail returns s without its first n elements (nil if it is shorter).
func tail[T any](s []T, n int) []T { return s[min(n, len(s)):] }
