package reflector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"sync"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// handled is what an error handler did with one error: the lines it
// logged ("V(n) message") and the messages it gave
// utilruntime.HandleErrorWithContext ("HandleError message").
type handled []string

// captureHandling runs handle with a context whose logger records every
// line, and with utilruntime.ErrorHandlers recording every call, and
// returns what it did.
func captureHandling(t *testing.T, handle func(ctx context.Context)) handled {
	t.Helper()
	var mu sync.Mutex
	var out handled
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, _ error, msg string, _ ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, "HandleError "+msg)
	}}
	defer func() { utilruntime.ErrorHandlers = saved }()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	handle(klog.NewContext(context.Background(), logger))
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		out = append(out, fmt.Sprintf("V(%d) %s", e.Verbosity, e.Message))
	}
	return out
}

// errorCauses are what a list or a watch's start fails with: io.EOF and
// io.ErrUnexpectedEOF bare and wrapped (a cut body, an HTTP client's
// *url.Error), API statuses, a refused connection, and anything else.
func errorCauses() map[string]error {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/pods", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	return map[string]error{
		"io.EOF":                               io.EOF,
		"io.ErrUnexpectedEOF":                  io.ErrUnexpectedEOF,
		"wrapped io.EOF":                       fmt.Errorf("decoding the metadata list: %w", io.EOF),
		"wrapped io.ErrUnexpectedEOF":          fmt.Errorf("malformed protobuf: the stream ends 12 bytes before its message's end: %w", io.ErrUnexpectedEOF),
		"io.EOF in a *url.Error":               &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/pods", Err: io.EOF},
		"io.ErrUnexpectedEOF read from a body": fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", io.ErrUnexpectedEOF),
		"410 expired":                          apierrors.NewResourceExpired("too old resource version"),
		//lint:ignore SA1019 an older apiserver still answers 410 Gone; the handlers must judge it alike
		"410 gone":           apierrors.NewGone("gone"),
		"429":                apierrors.NewTooManyRequests("slow down", 1),
		"500":                apierrors.NewInternalError(errors.New("boom")),
		"connection refused": refused,
		"forbidden":          apierrors.NewForbidden(v1.Resource("pods"), "", errors.New("no")),
		"anything else":      errors.New("boom"),
		"context deadline":   context.DeadlineExceeded,
	}
}

// Options.WatchErrorHandler, nil, logs like client-go: for every way a
// list or a watch's start fails, and every cause, the default handler
// writes the lines and utilruntime.HandleErrorWithContext calls that
// client-go writes for the same failure. In client-go v0.37.2
// (tools/cache/reflector.go), DefaultWatchErrorHandler gets a failed list
// wrapped ("failed to list %v: %w", in list), and a watch's start error
// bare, except a refused connection or a 429, which its watch loop retries
// with a V(4) line instead (watch, isWatchErrorRetriable). It compares
// that error itself with io.EOF and io.ErrUnexpectedEOF.
func TestDefaultErrorHandlerLogsLikeClientGo(t *testing.T) {
	theirs := cache.NewReflector(&cache.ListWatch{}, &v1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), 0)
	ours := New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{ExpectedType: &v1.Pod{}})
	desc := ours.typeDescription
	for name, cause := range errorCauses() {
		for _, tc := range []struct {
			kind   string
			ours   error
			theirs func(ctx context.Context)
		}{{
			kind: "a failed list",
			ours: fmt.Errorf("%w: %s: %w", ErrList, desc, cause),
			theirs: func(ctx context.Context) {
				cache.DefaultWatchErrorHandler(ctx, theirs, fmt.Errorf("failed to list %v: %w", desc, cause))
			},
		}, {
			kind: "a failed page of a list",
			ours: fmt.Errorf("%w: %s: page %d: %w", ErrList, desc, 2, cause),
			theirs: func(ctx context.Context) {
				cache.DefaultWatchErrorHandler(ctx, theirs, fmt.Errorf("failed to list %v: %w", desc, cause))
			},
		}, {
			kind: "a failed recovery's list",
			ours: fmt.Errorf("%w: %s: metadata list: %w", ErrList, desc, cause),
			theirs: func(ctx context.Context) {
				cache.DefaultWatchErrorHandler(ctx, theirs, fmt.Errorf("failed to list %v: %w", desc, cause))
			},
		}, {
			kind: "a watch that failed to start",
			ours: &watchStartError{context: fmt.Sprintf("%s: start at resourceVersion %q", desc, "10"), cause: cause},
			theirs: func(ctx context.Context) {
				if apierrors.IsTooManyRequests(cause) || errors.Is(cause, syscall.ECONNREFUSED) {
					klog.FromContext(ctx).V(4).Info("Watch failed - backing off", "err", cause)
					return
				}
				cache.DefaultWatchErrorHandler(ctx, theirs, cause)
			},
		}} {
			want := captureHandling(t, tc.theirs)
			got := captureHandling(t, func(ctx context.Context) { ours.defaultErrorHandler(ctx, tc.ours) })
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s with %s (%v): ours %q, client-go's %q", tc.kind, name, tc.ours, got, want)
			}
		}
	}
}
