package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/processor"
)

// reenter calls the informer back from its watch error handler, as a
// user's handler may. RemoveEventHandler of a handle never added takes the
// informer's locks and changes nothing. An error means the call did not
// return: the report was made under one of those locks. The test harnesses
// call it from every report, so each test that makes the informer report
// checks that report's path.
func reenter(inf *bcache.Informer) error {
	done := make(chan struct{})
	go func() {
		_ = inf.RemoveEventHandler(&processor.Listener{})
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("RemoveEventHandler from the watch error handler did not return: the report was made under the informer's lock")
	}
}

// client-go calls the watch error handler from the reflector's goroutine,
// holding none of the informer's locks, so a handler may call the informer
// back. Here the error is found while a watch event is applied (an object
// the file cannot encode): the handler registers an event handler, which
// must return rather than wait for the lock the report was made under.
func TestWatchErrorHandlerMayCallTheInformer(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	reentered := make(chan error, 10)
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		if err := inf.SetTransform(func(obj interface{}) (interface{}, error) {
			p := obj.(*corev1.Pod)
			return &unregistered{ObjectMeta: p.ObjectMeta}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if !errors.Is(err, persist.ErrUnencodable) {
				return
			}
			done := make(chan error, 1)
			go func() {
				_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
				done <- err
			}()
			select {
			case err := <-done:
				reentered <- err
			case <-time.After(30 * time.Second):
				reentered <- errors.New("AddEventHandler from the watch error handler did not return: the report was made under the informer's lock")
			}
		}); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case err := <-reentered:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the unencodable object was not reported to the watch error handler")
	}
	r.stop()
}
