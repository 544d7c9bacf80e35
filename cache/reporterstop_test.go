package cache_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// client-go calls the watch error handler on the reflector's goroutine, and
// its controller waits for that goroutine before RunWithContext returns. So
// no handler call is in progress, or starts, once RunWithContext has
// returned. Here an error found under blockDeltas (an object the file cannot
// encode) reaches a handler that has not returned when the informer is
// stopped. RunWithContext must not return before the handler does: a caller
// that frees what the handler uses once Run returns would race with it.
func TestWatchErrorHandlerNotRunningAfterRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inf, closeAll := unencodableInformer(t)
		entered, release := make(chan struct{}), make(chan struct{})
		returned := make(chan struct{})
		first := true
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if !errors.Is(err, persist.ErrUnencodable) || !first {
				return
			}
			first = false
			close(entered)
			<-release
			close(returned)
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { inf.RunWithContext(ctx); close(done) }()

		<-entered
		cancel()
		synctest.Wait() // every goroutine of the bubble has stopped or waits

		select {
		case <-done:
			select {
			case <-returned:
			default:
				t.Error("RunWithContext returned while the watch error handler was still running; client-go's returns only after its reflector's handler call")
			}
		default: // RunWithContext waits for the handler, as client-go's
		}
		close(release)
		<-done
		closeAll()
	})
}

// client-go hands the watch error handler its reflector's context, which is
// cancelled when the informer stops. A handler may wait on it, as client-go's
// own TestSharedInformerErrorHandling does to give up sending once the test
// is over. Here the handler waits on its context after an error found under
// blockDeltas (an object the file cannot encode). Stopping the informer
// must end that wait: the handler's goroutine must not outlive
// RunWithContext.
func TestWatchErrorHandlerContextEndsWithTheInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inf, closeAll := unencodableInformer(t)
		entered, returned, cleanup := make(chan struct{}), make(chan struct{}), make(chan struct{})
		first := true
		if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
			if !errors.Is(err, persist.ErrUnencodable) || !first {
				return
			}
			first = false
			close(entered)
			select {
			case <-ctx.Done():
			case <-cleanup: // the test's end, should the context never end
			}
			close(returned)
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { inf.RunWithContext(ctx); close(done) }()

		<-entered
		cancel()
		<-done
		synctest.Wait() // the handler has returned, or waits for good
		select {
		case <-returned:
		default:
			t.Error("the informer stopped, but the context it gave the watch error handler did not end: the handler's goroutine outlives RunWithContext")
		}
		close(cleanup)
		<-returned
		closeAll()
	})
}

// unencodableInformer makes an informer over one Pod whose transform
// returns a type the file's scheme does not know: applying the Pod fails
// under blockDeltas, and the error goes to the watch error handler.
// closeAll shuts the source down and closes the file, once the informer
// has stopped.
func unencodableInformer(t *testing.T) (inf *bcache.Informer, closeAll func()) {
	db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{
		Scheme:        scheme.Scheme,
		NoSync:        true,
		BatchInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := fcache.NewFakeControllerSource()
	src.Add(pod("ns", "a", "", nil))
	inf, err = bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{DB: db, Collection: "pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.SetTransform(func(obj interface{}) (interface{}, error) {
		return &unregistered{ObjectMeta: obj.(*corev1.Pod).ObjectMeta}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return inf, func() {
		src.Shutdown()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}
}
