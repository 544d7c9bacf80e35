package reflector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// Options.WatchErrorHandler promises, when nil, to "log like client-go's
// DefaultWatchErrorHandler (... io.EOF silent, io.ErrUnexpectedEOF at
// V(1) ...)". client-go compares the error itself (err == io.EOF, err ==
// io.ErrUnexpectedEOF): only a watch that closed is quiet, and a failed
// list whose error wraps either is reported through
// utilruntime.HandleError ("Failed to watch"). Ours matches wrapped errors
// (errors.Is), so a failed list is silent or at V(1), described as a
// watch that closed. e2ab2dd turned a recovery page cut short into
// ErrMalformed wrapping io.ErrUnexpectedEOF so that "a caller reads it as
// a failed response", and so that it is logged; with the default handler
// it is still not logged at the default verbosity.
func TestDefaultErrorHandlerReportsFailedListsLikeClientGo(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := len(reported)
		reported = nil
		return n
	}

	// internal/errMalformed's text: the reflector does not import it.
	errMalformed := errors.New("malformed protobuf")
	ctx := context.Background()
	theirs := cache.NewReflector(&cache.ListWatch{}, &v1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), 0)
	ours := New(&cache.ListWatch{}, reflectortest.NewRecordingStore(), Options{ExpectedType: &v1.Pod{}})
	for _, err := range []error{
		// A recovery's metadata page cut short twice (the page, then the
		// page asked for again).
		fmt.Errorf("%w: *v1.Pod: metadata list: reading the metadata list: %w", ErrList, fmt.Errorf("%w: the stream ends 12 bytes before its message's end: %w", errMalformed, io.ErrUnexpectedEOF)),
		// A list whose body was empty, decoded as JSON.
		fmt.Errorf("%w: *v1.Pod: metadata list: decoding the metadata list: %w", ErrList, io.EOF),
	} {
		cache.DefaultWatchErrorHandler(ctx, theirs, err)
		want := take()
		ours.defaultErrorHandler(ctx, err)
		if got := take(); got != want {
			t.Errorf("%v: reported through utilruntime.HandleError %d times, client-go's default handler %d", err, got, want)
		}
	}
}
