package cache_test

import (
	"context"
	"errors"
	"fmt"
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
	return callBack("RemoveEventHandler", func() error {
		return inf.RemoveEventHandler(&processor.Listener{})
	})
}

// callBack runs call, named what, on a goroutine of its own and returns its
// error. If call does not return, callBack returns an error saying so. The
// watch error handler it runs from was then called under the lock call
// takes.
func callBack(what string, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s from the watch error handler did not return: the report was made under the informer's lock", what)
	}
}

// client-go calls the watch error handler from the reflector's goroutine,
// holding none of the informer's locks, so a handler may call the informer
// back. Here the error is found while a watch event is applied, for an
// object the file cannot encode. The handler registers an event handler.
// That must return rather than wait for the lock the report was made under.
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
			reentered <- callBack("AddEventHandler", func() error {
				_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
				return err
			})
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
