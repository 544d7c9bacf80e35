package reflectortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// ScriptedLW scripts a cache.ListWatch and records every request. Set its
// exported fields before the first request; ListWatch reads them on each.
type ScriptedLW struct {
	// T reports a List call when List is nil.
	T testing.TB
	// List answers the n-th List call, counting from 0. When nil, any List
	// call is a test error.
	List func(n int, opts metav1.ListOptions) (runtime.Object, error)
	// Watch answers the n-th Watch call, counting from 0. When nil, every
	// Watch gets a fresh RaceFreeFakeWatcher.
	Watch func(n int, opts metav1.ListOptions) (watch.Interface, error)

	// mu guards every field below.
	mu        sync.Mutex
	listOpts  []metav1.ListOptions
	watchOpts []metav1.ListOptions
	// watchers holds each RaceFreeFakeWatcher handed out without an error,
	// by the index of its Watch call.
	watchers map[int]*watch.RaceFreeFakeWatcher
	// requests are all requests in order: "list@rv", "read@" (a limit=1
	// list at ""), "watch@rv".
	requests []string
}

// ListWatch returns the cache.ListWatch that records each request and
// answers it with List or Watch.
func (f *ScriptedLW) ListWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			n := len(f.listOpts)
			f.listOpts = append(f.listOpts, opts)
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				f.requests = append(f.requests, "read@")
			} else {
				f.requests = append(f.requests, "list@"+opts.ResourceVersion)
			}
			f.mu.Unlock()
			if f.List == nil {
				f.T.Errorf("unexpected List(%+v)", opts)
				return nil, errors.New("unexpected list")
			}
			return f.List(n, opts)
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			n := len(f.watchOpts)
			f.watchOpts = append(f.watchOpts, opts)
			f.requests = append(f.requests, "watch@"+opts.ResourceVersion)
			f.mu.Unlock()
			var w watch.Interface = watch.NewRaceFreeFake()
			var err error
			if f.Watch != nil {
				w, err = f.Watch(n, opts)
			}
			if rf, ok := w.(*watch.RaceFreeFakeWatcher); ok && err == nil {
				f.mu.Lock()
				if f.watchers == nil {
					f.watchers = map[int]*watch.RaceFreeFakeWatcher{}
				}
				f.watchers[n] = rf
				f.mu.Unlock()
			}
			return w, err
		},
	}
}

// SignalWatch makes every Watch a quiet fake watcher and closes opened as
// the first Watch is answered.
func (f *ScriptedLW) SignalWatch(opened chan struct{}) {
	f.Watch = func(n int, _ metav1.ListOptions) (watch.Interface, error) {
		if n == 0 {
			close(opened)
		}
		return watch.NewRaceFreeFake(), nil
	}
}

// Requests returns every request so far in order, without the limit=1
// reads at "" (see requests).
func (f *ScriptedLW) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if r != "read@" {
			out = append(out, r)
		}
	}
	return out
}

// ListOpts returns the options of every List call so far, in order.
func (f *ScriptedLW) ListOpts() []metav1.ListOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.listOpts)
}

// ListRVs returns the resourceVersion of every List call so far, in order.
func (f *ScriptedLW) ListRVs() []string {
	return resourceVersions(f.ListOpts())
}

// WatchOpts returns the options of every Watch call so far, in order.
func (f *ScriptedLW) WatchOpts() []metav1.ListOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.watchOpts)
}

// WatchRVs returns the resourceVersion of every Watch call so far, in order.
func (f *ScriptedLW) WatchRVs() []string {
	return resourceVersions(f.WatchOpts())
}

// resourceVersions returns the resourceVersion of each of opts; nil for none.
func resourceVersions(opts []metav1.ListOptions) []string {
	var rvs []string
	for _, o := range opts {
		rvs = append(rvs, o.ResourceVersion)
	}
	return rvs
}

// Watcher waits for the fake watcher handed out by the n-th Watch call. It
// fails t if none was handed out within five seconds.
func (f *ScriptedLW) Watcher(t testing.TB, n int) *watch.RaceFreeFakeWatcher {
	t.Helper()
	var w *watch.RaceFreeFakeWatcher
	poll.Until(t, 5*time.Second, fmt.Sprintf("watch #%d", n), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		w = f.watchers[n]
		return w != nil
	})
	return w
}
