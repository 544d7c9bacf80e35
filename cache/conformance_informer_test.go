// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Tests ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/shared_informer_test.go
// The ports are listed in hack/upstream-versions.txt.

package cache_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	testingclock "k8s.io/utils/clock/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// Ports of client-go v0.37.2 tools/cache/shared_informer_test.go to our
// informer. Only construction is adapted (a cache file per informer, the
// fake clock passed as an option instead of assigned to unexported fields),
// plus:
//
//   - eventHandlerCount / isRegistered read client-go's unexported
//     processor; here registration is observed through behaviour (which
//     handlers an event reaches).
//   - testListener.ok waits 250ms for stragglers instead of 1s.
//   - TestShutdown relies on goleak in client-go; here confNoLeaks checks
//     that no goroutine of the informer's packages outlives the test.
//   - TestEventPanics "many" uses 3 pods instead of 5 (it sleeps a second
//     per panic).
//   - TestSharedInformerWatchDisruption waits for the failed watch and then
//     steps the fake clock until the relist is seen, instead of stepping it
//     once after a 10ms sleep (the same race client-go's TODO mentions).
//   - TestSharedInformerErrorHandling's error handler gives up sending once
//     the test is over, so a retried list cannot block the reflector.
//   - Resync periods run on the fake clock option, stepped once the resync
//     timer is armed (client-go's tests use synctest or assign the clock).
//
// Not ported:
//
//   - TestListenerResyncPeriodsDelayed: needs sharedProcessorRunHook, an
//     unexported client-go test hook.
//   - TestResyncCheckPeriod reads unexported fields (resyncCheckPeriod,
//     listener resyncPeriod); TestConformanceResyncCheckPeriod checks the
//     same rules through the resyncs handlers receive.

// confFakeSource is client-go's FakeControllerSource, reporting that it does
// not support watch-list semantics (as client-go's own tests wrap it).
type confFakeSource struct {
	*fcache.FakeControllerSource
}

func (confFakeSource) IsWatchListSemanticsUnSupported() bool { return true }

func newConfFakeSource(tb testing.TB) confFakeSource {
	source := fcache.NewFakeControllerSource()
	tb.Cleanup(source.Shutdown)
	return confFakeSource{source}
}

// newConfInformer is our NewSharedInformer: a cache file of its own in
// tb.TempDir(), closed at cleanup (after the test has stopped the
// informer).
func newConfInformer(tb testing.TB, lw cache.ListerWatcher, resync time.Duration, opts ...func(*bcache.InformerOptions)) *bcache.Informer {
	tb.Helper()
	db, err := persist.Open(filepath.Join(tb.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: 2 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close cache file: %v", err)
		}
	})
	o := bcache.InformerOptions{
		Persistence:  bcache.Persistence{DB: db, Collection: "pods"},
		ResyncPeriod: resync,
	}
	for _, opt := range opts {
		opt(&o)
	}
	inf, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, o)
	if err != nil {
		tb.Fatal(err)
	}
	return inf
}

func withClock(c *testingclock.FakeClock) func(*bcache.InformerOptions) {
	return func(o *bcache.InformerOptions) { o.Clock = c }
}

// confTestListener is client-go's testListener.
type confTestListener struct {
	lock              sync.RWMutex
	resyncPeriod      time.Duration
	expectedItemNames sets.Set[string]
	receivedItemNames []string
	name              string
}

func newConfTestListener(name string, resyncPeriod time.Duration, expected ...string) *confTestListener {
	return &confTestListener{resyncPeriod: resyncPeriod, expectedItemNames: sets.New(expected...), name: name}
}

func (l *confTestListener) OnAdd(obj interface{}, isInInitialList bool) { l.handle(obj) }
func (l *confTestListener) OnUpdate(old, new interface{})               { l.handle(new) }
func (l *confTestListener) OnDelete(obj interface{})                    {}

func (l *confTestListener) handle(obj interface{}) {
	l.lock.Lock()
	defer l.lock.Unlock()
	objectMeta, _ := meta.Accessor(obj)
	l.receivedItemNames = append(l.receivedItemNames, objectMeta.GetName())
}

func (l *confTestListener) ok() bool {
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return l.satisfiedExpectations(), nil
	})
	if err != nil {
		return false
	}
	// wait just a bit to allow any unexpected stragglers to come in
	time.Sleep(250 * time.Millisecond)
	return l.satisfiedExpectations()
}

func (l *confTestListener) satisfiedExpectations() bool {
	l.lock.RLock()
	defer l.lock.RUnlock()
	return sets.New(l.receivedItemNames...).Equal(l.expectedItemNames)
}

func (l *confTestListener) received() []string {
	l.lock.RLock()
	defer l.lock.RUnlock()
	return append([]string(nil), l.receivedItemNames...)
}

func (l *confTestListener) reset() {
	l.lock.Lock()
	defer l.lock.Unlock()
	l.receivedItemNames = nil
}

// confCounter counts calls per handler; a registration is "registered" if
// an event reaches it.
type confCounter struct {
	mu    sync.Mutex
	names []string
}

func (c *confCounter) OnAdd(obj interface{}, _ bool) { c.add(obj) }
func (c *confCounter) OnUpdate(_, obj interface{})   { c.add(obj) }
func (c *confCounter) OnDelete(obj interface{})      { c.add(obj) }

func (c *confCounter) add(obj interface{}) {
	m, _ := meta.Accessor(obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, m.GetName())
}

func (c *confCounter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

func confRunInformer(inf cache.SharedInformer) (stop func()) {
	var wg wait.Group
	ch := make(chan struct{})
	wg.StartWithChannel(ch, inf.Run)
	return func() {
		close(ch)
		wg.Wait()
	}
}

// confStepWhenArmed waits until a timer waits on the fake clock and steps
// it. While a watch runs, the informer's only timer is the resync timer.
func confStepWhenArmed(t *testing.T, c *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	if err := poll.Wait(10*time.Second, c.HasWaiters); err != nil {
		t.Fatalf("no timer armed on the fake clock: %v", err)
	}
	c.Step(d)
	// The fired timer is gone; the resync loop arms the next one after the
	// check (and the resync it decided on) is done.
	if err := poll.Wait(10*time.Second, c.HasWaiters); err != nil {
		t.Fatalf("resync timer not re-armed after a step: %v", err)
	}
}

func TestConformanceIndexer(t *testing.T) {
	source := newConfFakeSource(t)
	pod1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1", Labels: map[string]string{"a": "a-val", "b": "b-val1"}}}
	pod2 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2", Labels: map[string]string{"b": "b-val2"}}}
	pod3 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod3", Labels: map[string]string{"a": "a-val2"}}}
	source.Add(pod1)
	source.Add(pod2)

	informer := newConfInformer(t, source, 1*time.Second)
	labelKeys := func(obj interface{}) ([]string, error) {
		res := []string{}
		for k := range obj.(*corev1.Pod).Labels {
			res = append(res, k)
		}
		return res, nil
	}
	if err := informer.AddIndexers(map[string]cache.IndexFunc{"labels": labelKeys}); err != nil {
		t.Fatal(err)
	}
	stop := confRunInformer(informer)
	defer stop()
	if !cache.WaitForCacheSync(make(chan struct{}), informer.HasSynced) {
		t.Fatal("not synced")
	}

	byIndex := func(index, value string) []string {
		res, err := informer.GetIndexer().ByIndex(index, value)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range res {
			out = append(out, o.(*corev1.Pod).Name)
		}
		sort.Strings(out)
		return out
	}
	if got := byIndex("labels", "a"); strings.Join(got, ",") != "pod1" {
		t.Fatalf("ByIndex(labels, a) = %v, want [pod1]", got)
	}

	// Adding an item later is fine as well
	source.Add(pod3)
	if err := poll.Wait(3*time.Second, func() bool { return strings.Join(byIndex("labels", "a"), ",") == "pod1,pod3" }); err != nil {
		t.Fatalf("ByIndex(labels, a) = %v, want [pod1 pod3]", byIndex("labels", "a"))
	}

	// Adding an index later is also fine
	if err := informer.AddIndexers(map[string]cache.IndexFunc{"labels-again": labelKeys}); err != nil {
		t.Fatal(err)
	}
	// Should be immediately available
	if got := byIndex("labels-again", "a"); strings.Join(got, ",") != "pod1,pod3" {
		t.Fatalf("ByIndex(labels-again, a) = %v, want [pod1 pod3]", got)
	}
	for _, index := range []string{"labels", "labels-again"} {
		if got := informer.GetIndexer().ListIndexFuncValues(index); !sets.New(got...).Equal(sets.New("a", "b")) {
			t.Fatalf("ListIndexFuncValues(%s) = %v", index, got)
		}
	}
}

func TestConformanceListenerResyncPeriods(t *testing.T) {
	// source simulates an apiserver object endpoint.
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2"}})

	// create the shared informer and resync every 1s
	clock := testingclock.NewFakeClock(time.Now())
	informer := newConfInformer(t, source, 1*time.Second, withClock(clock))

	// listener 1, never resync
	listener1 := newConfTestListener("listener1", 0, "pod1", "pod2")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listener1, listener1.resyncPeriod)
	// listener 2, resync every 2s
	listener2 := newConfTestListener("listener2", 2*time.Second, "pod1", "pod2")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listener2, listener2.resyncPeriod)
	// listener 3, resync every 3s
	listener3 := newConfTestListener("listener3", 3*time.Second, "pod1", "pod2")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listener3, listener3.resyncPeriod)
	listeners := []*confTestListener{listener1, listener2, listener3}

	stop := confRunInformer(informer)
	defer stop()

	// Ensure all listeners got the initial after the initial processing, at the initial start time.
	for _, listener := range listeners {
		if !listener.ok() {
			t.Errorf("%s: expected %v, got %v", listener.name, listener.expectedItemNames, listener.received())
		}
	}
	for _, listener := range listeners {
		listener.reset()
	}

	// advance so listener2 gets a resync
	confStepWhenArmed(t, clock, time.Second)
	confStepWhenArmed(t, clock, time.Second)
	if !listener2.ok() {
		t.Errorf("%s: expected %v, got %v", listener2.name, listener2.expectedItemNames, listener2.received())
	}
	// make sure listeners 1 and 3 got nothing
	if n := len(listener1.received()); n != 0 {
		t.Errorf("listener1: should not have resynced (got %d)", n)
	}
	if n := len(listener3.received()); n != 0 {
		t.Errorf("listener3: should not have resynced (got %d)", n)
	}
	for _, listener := range listeners {
		listener.reset()
	}

	// advance so listener3 gets a resync
	confStepWhenArmed(t, clock, time.Second)
	if !listener3.ok() {
		t.Errorf("%s: expected %v, got %v", listener3.name, listener3.expectedItemNames, listener3.received())
	}
	// make sure listeners 1 and 2 got nothing
	if n := len(listener1.received()); n != 0 {
		t.Errorf("listener1: should not have resynced (got %d)", n)
	}
	if n := len(listener2.received()); n != 0 {
		t.Errorf("listener2: should not have resynced (got %d)", n)
	}
}

// TestConformanceResyncCheckPeriod is client-go's TestResyncCheckPeriod
// observed through behaviour. Handlers ask for 0, 1m, 55s and 5s on an
// informer with a 12h default. That makes it check every 5s, and each
// handler is resynced on its own period.
func TestConformanceResyncCheckPeriod(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	clock := testingclock.NewFakeClock(time.Now())
	informer := newConfInformer(t, source, 12*time.Hour, withClock(clock))
	periods := []time.Duration{0, time.Minute, 55 * time.Second, 5 * time.Second}
	counters := make([]*confCounter, len(periods))
	for i, p := range periods {
		counters[i] = &confCounter{}
		if _, err := informer.AddEventHandlerWithResyncPeriod(counters[i], p); err != nil {
			t.Fatal(err)
		}
	}
	stop := confRunInformer(informer)
	defer stop()
	if err := poll.Wait(5*time.Second, func() bool {
		for _, c := range counters {
			if len(c.got()) != 1 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("initial adds not delivered: %v", err)
	}
	// After 12 checks 5s apart: listener 4 resynced 12 times, listener 3
	// once (55s), listener 2 once (60s), listener 1 never.
	want := [][]int{}
	for step := 1; step <= 12; step++ {
		secs := 5 * step
		w := []int{0, secs / 60, secs / 55, step}
		want = append(want, w)
		confStepWhenArmed(t, clock, 5*time.Second)
		if err := poll.Wait(5*time.Second, func() bool {
			for i, c := range counters {
				if len(c.got())-1 < w[i] {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatalf("after %ds: resyncs %v, want %v", secs, confResyncCounts(counters), w)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got, w := confResyncCounts(counters), want[len(want)-1]; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("after 60s: resyncs per handler %v, want %v", got, w)
	}
}

func confResyncCounts(cs []*confCounter) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = len(c.got()) - 1
	}
	return out
}

// verify that https://github.com/kubernetes/kubernetes/issues/59822 is fixed
func TestConformanceSharedInformerInitializationRace(t *testing.T) {
	source := newConfFakeSource(t)
	informer := newConfInformer(t, source, 1*time.Second)
	listener := newConfTestListener("raceListener", 0)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = informer.AddEventHandlerWithResyncPeriod(listener, listener.resyncPeriod)
	}()
	stop := confRunInformer(informer)
	defer stop()
	<-done
}

// TestConformanceSharedInformerWatchDisruption simulates a watch that was
// closed with updates to the store during that time. We ensure that
// handlers with resync and no resync see the expected state.
func TestConformanceSharedInformerWatchDisruption(t *testing.T) {
	// source simulates an apiserver object endpoint.
	source := newConfFakeSource(t)
	lw := &confCountingLW{confFakeSource: source}

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1", UID: "pod1", ResourceVersion: "1"}})
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2", UID: "pod2", ResourceVersion: "2"}})

	// create the shared informer and resync every 1s
	clock := testingclock.NewFakeClock(time.Now())
	informer := newConfInformer(t, lw, 1*time.Second, withClock(clock))

	// listener, never resync
	listenerNoResync := newConfTestListener("listenerNoResync", 0, "pod1", "pod2")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listenerNoResync, listenerNoResync.resyncPeriod)

	listenerResync := newConfTestListener("listenerResync", 1*time.Second, "pod1", "pod2")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listenerResync, listenerResync.resyncPeriod)
	listeners := []*confTestListener{listenerNoResync, listenerResync}

	stop := confRunInformer(informer)
	defer stop()

	for _, listener := range listeners {
		if !listener.ok() {
			t.Errorf("%s: expected %v, got %v", listener.name, listener.expectedItemNames, listener.received())
		}
	}

	// Add pod3, bump pod2 but don't broadcast it, so that the change will be seen only on relist
	source.AddDropWatch(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod3", UID: "pod3", ResourceVersion: "3"}})
	source.ModifyDropWatch(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2", UID: "pod2", ResourceVersion: "4"}})

	// Ensure that nobody saw any changes
	for _, listener := range listeners {
		if !listener.ok() {
			t.Errorf("%s: expected %v, got %v", listener.name, listener.expectedItemNames, listener.received())
		}
	}

	for _, listener := range listeners {
		listener.reset()
	}

	listenerNoResync.expectedItemNames = sets.New("pod2", "pod3")
	listenerResync.expectedItemNames = sets.New("pod1", "pod2", "pod3")

	// This calls shouldSync, which deletes noResync from the list of syncingListeners
	confStepWhenArmed(t, clock, 1*time.Second)

	// Simulate a connection loss (or even just a too-old-watch)
	watchErrors := lw.watchErrors()
	source.ResetWatch()

	// Wait for the reflector to get 410 on its new watch and start its
	// backoff wait on the fake clock, then advance the clock past it (and
	// again, should the first step have come before the wait).
	if err := poll.Wait(10*time.Second, func() bool { return lw.watchErrors() > watchErrors }); err != nil {
		t.Fatalf("the watch after ResetWatch did not fail: %v", err)
	}
	if err := poll.Wait(10*time.Second, func() bool {
		if listenerNoResync.satisfiedExpectations() && listenerResync.satisfiedExpectations() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
		clock.Step(1601 * time.Millisecond)
		return false
	}); err != nil {
		t.Logf("relist not observed: %v", err)
	}

	for _, listener := range listeners {
		if !listener.ok() {
			t.Errorf("%s: expected %v, got %v", listener.name, listener.expectedItemNames, listener.received())
		}
	}
}

// confCountingLW counts failed watch requests.
type confCountingLW struct {
	confFakeSource
	mu     sync.Mutex
	failed int
}

func (l *confCountingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.confFakeSource.Watch(opts)
	if err != nil {
		l.mu.Lock()
		l.failed++
		l.mu.Unlock()
	}
	return w, err
}

func (l *confCountingLW) watchErrors() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func TestConformanceSharedInformerErrorHandling(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	source.ListError = fmt.Errorf("Access Denied")

	informer := newConfInformer(t, source, 1*time.Second)

	errCh := make(chan error)
	stopCh := make(chan struct{})
	_ = informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		select {
		case errCh <- err:
		case <-stopCh:
		}
	})

	stop := confRunInformer(informer)
	defer stop()
	defer close(stopCh)

	select {
	case err := <-errCh:
		if !strings.Contains(err.Error(), "Access Denied") {
			t.Errorf("Expected 'Access Denied' error. Actual: %v", err)
		}
	case <-time.After(time.Second):
		t.Errorf("Timeout waiting for error handler call")
	}
}

// TestConformanceSharedInformerStartRace is a regression test to ensure
// there is no race between Run and SetWatchErrorHandler, and Run and
// SetTransform.
func TestConformanceSharedInformerStartRace(t *testing.T) {
	source := newConfFakeSource(t)
	informer := newConfInformer(t, source, 1*time.Second)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Set dummy functions, just to test for race
			_ = informer.SetTransform(func(i interface{}) (interface{}, error) { return i, nil })
			_ = informer.SetWatchErrorHandler(func(r *cache.Reflector, err error) {})
		}
	}()

	var wg wait.Group
	wg.StartWithChannel(stop, informer.Run)
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	<-done
}

func TestConformanceSharedInformerTransformer(t *testing.T) {
	// source simulates an apiserver object endpoint.
	source := newConfFakeSource(t)

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1", UID: "pod1", ResourceVersion: "1"}})
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2", UID: "pod2", ResourceVersion: "2"}})

	informer := newConfInformer(t, source, 1*time.Second)
	_ = informer.SetTransform(func(obj interface{}) (interface{}, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			name := pod.GetName()

			if upper := strings.ToUpper(name); upper != name {
				pod.SetName(upper)
				return pod, nil
			}
		}
		return obj, nil
	})

	listenerTransformer := newConfTestListener("listenerTransformer", 0, "POD1", "POD2")
	_, _ = informer.AddEventHandler(listenerTransformer)

	stop := confRunInformer(informer)
	defer stop()

	if !listenerTransformer.ok() {
		t.Errorf("%s: expected %v, got %v", listenerTransformer.name, listenerTransformer.expectedItemNames, listenerTransformer.received())
	}
}

// confRegistered adds a pod named probe and reports, for each counter,
// whether the event reached it. It waits for the counters expected to get it
// (want), then a little longer for any that should not.
func confRegistered(t *testing.T, source confFakeSource, probe string, want []bool, counters ...*confCounter) []bool {
	t.Helper()
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: probe}})
	has := func(c *confCounter) bool {
		for _, n := range c.got() {
			if n == probe {
				return true
			}
		}
		return false
	}
	_ = poll.Wait(5*time.Second, func() bool {
		for i, c := range counters {
			if want[i] && !has(c) {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond)
	out := make([]bool, len(counters))
	for i, c := range counters {
		out[i] = has(c)
	}
	return out
}

func TestConformanceSharedInformerRemoveHandler(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)

	handler1 := &confCounter{}
	handle1, err := informer.AddEventHandler(handler1)
	if err != nil {
		t.Fatalf("informer did not add handler1: %s", err)
	}
	handler2 := &confCounter{}
	handle2, err := informer.AddEventHandler(handler2)
	if err != nil {
		t.Fatalf("informer did not add handler2: %s", err)
	}

	if err := informer.RemoveEventHandler(handle2); err != nil {
		t.Errorf("removing of second pointer handler failed: %s", err)
	}
	// Not running yet: run it to see who is registered.
	stop := confRunInformer(informer)
	defer stop()
	if got := fmt.Sprint(confRegistered(t, source, "probe1", []bool{true, false}, handler1, handler2)); got != "[true false]" {
		t.Errorf("after removing handler 2, registered = %s, want [true false]", got)
	}

	if err := informer.RemoveEventHandler(handle1); err != nil {
		t.Errorf("removing of first pointer handler failed: %s", err)
	}
	if got := fmt.Sprint(confRegistered(t, source, "probe2", []bool{false, false}, handler1, handler2)); got != "[false false]" {
		t.Errorf("informer still has registered handlers after removing both handlers: %s", got)
	}
}

func TestConformanceSharedInformerRemoveForeignHandler(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	informer := newConfInformer(t, source, 1*time.Second)

	source2 := newConfFakeSource(t)
	source2.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	informer2 := newConfInformer(t, source2, 1*time.Second)

	handler1 := &confCounter{}
	handle1, err := informer.AddEventHandler(handler1)
	if err != nil {
		t.Fatalf("informer did not add handler1: %s", err)
	}
	handler2 := &confCounter{}
	handle2, err := informer.AddEventHandler(handler2)
	if err != nil {
		t.Fatalf("informer did not add handler2: %s", err)
	}
	probe2 := &confCounter{}
	if _, err := informer2.AddEventHandler(probe2); err != nil {
		t.Fatal(err)
	}

	// remove handle at foreign informer
	if err := informer2.RemoveEventHandler(handle1); err != nil {
		t.Errorf("removing of foreign handler failed: %s", err)
	}
	if err := informer2.RemoveEventHandler(handle2); err != nil {
		t.Errorf("removing of foreign handler failed: %s", err)
	}

	stop := confRunInformer(informer)
	defer stop()
	stop2 := confRunInformer(informer2)
	defer stop2()
	if got := fmt.Sprint(confRegistered(t, source, "probe1", []bool{true, true}, handler1, handler2)); got != "[true true]" {
		t.Errorf("after removing them from another informer, registered = %s, want [true true]", got)
	}
	if got := fmt.Sprint(confRegistered(t, source2, "probe2", []bool{true, false, false}, probe2, handler1, handler2)); got != "[true false false]" {
		t.Errorf("informer2's handlers reached = %s, want [true false false]", got)
	}

	if err := informer.RemoveEventHandler(handle2); err != nil {
		t.Errorf("removing of second pointer handler failed: %s", err)
	}
	if got := fmt.Sprint(confRegistered(t, source, "probe3", []bool{true, false}, handler1, handler2)); got != "[true false]" {
		t.Errorf("after removing handler 2, registered = %s, want [true false]", got)
	}
	if err := informer.RemoveEventHandler(handle1); err != nil {
		t.Errorf("removing of first pointer handler failed: %s", err)
	}
	if got := fmt.Sprint(confRegistered(t, source, "probe4", []bool{false, false}, handler1, handler2)); got != "[false false]" {
		t.Errorf("informer still has registered handlers after removing both: %s", got)
	}
}

func TestConformanceSharedInformerMultipleRegistration(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)
	stop := confRunInformer(informer)
	defer stop()

	handler1 := &confCounter{}
	reg1, err := informer.AddEventHandler(handler1)
	if err != nil {
		t.Fatalf("informer did not add handler for the first time: %s", err)
	}
	reg2, err := informer.AddEventHandler(handler1)
	if err != nil {
		t.Fatalf("informer did not add handler for the second: %s", err)
	}
	count := func(name string) int {
		n := 0
		for _, g := range handler1.got() {
			if g == name {
				n++
			}
		}
		return n
	}
	// Two registrations: each event reaches the handler twice.
	confRegistered(t, source, "probe1", []bool{true}, handler1)
	_ = poll.Wait(time.Second, func() bool { return count("probe1") == 2 })
	if n := count("probe1"); n != 2 {
		t.Errorf("handler registered twice got an event %d times, want 2", n)
	}

	if err := informer.RemoveEventHandler(reg1); err != nil {
		t.Errorf("removing of duplicate handler registration failed: %s", err)
	}
	confRegistered(t, source, "probe2", []bool{true}, handler1)
	if n := count("probe2"); n != 1 {
		t.Errorf("after removing one of two registrations the handler got an event %d times, want 1", n)
	}

	if err := informer.RemoveEventHandler(reg2); err != nil {
		t.Errorf("removing of second handler registration failed: %s", err)
	}
	confRegistered(t, source, "probe3", []bool{false}, handler1)
	if n := count("probe3"); n != 0 {
		t.Errorf("after removing both registrations the handler got an event %d times, want 0", n)
	}
}

func TestConformanceRemovingRemovedSharedInformer(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)
	handler := &confCounter{}
	reg, err := informer.AddEventHandler(handler)
	if err != nil {
		t.Fatalf("informer did not add handler for the first time: %s", err)
	}
	if err := informer.RemoveEventHandler(reg); err != nil {
		t.Fatalf("removing of handler registration failed: %s", err)
	}
	if err := informer.RemoveEventHandler(reg); err != nil {
		t.Errorf("removing of already removed registration yields unexpected error: %s", err)
	}
	stop := confRunInformer(informer)
	defer stop()
	if got := confRegistered(t, source, "probe", []bool{false}, handler); got[0] {
		t.Errorf("handle is still active after two removes")
	}
}

// Shows that many concurrent goroutines can be manipulating shared informer
// listeners without tripping it up. There are not really many assertions in this
// test. Meant to be run with -race to find race conditions
func TestConformanceSharedInformerHandlerAbuse(t *testing.T) {
	source := newConfFakeSource(t)
	informer := newConfInformer(t, source, 1*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	informerCtx, informerCancel := context.WithCancel(context.Background())
	var informerWg wait.Group
	informerWg.StartWithChannel(informerCtx.Done(), informer.Run)
	defer func() {
		cancel()
		informerWg.Wait()
	}()

	worker := func() {
		// Keep adding and removing handler
		// Make sure no duplicate events?
		funcs := cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj interface{}, isInInitialList bool) {},
			UpdateFunc: func(oldObj, newObj interface{}) {},
			DeleteFunc: func(obj interface{}) {},
		}
		handles := []cache.ResourceEventHandlerRegistration{}

		for {
			select {
			case <-ctx.Done():
				return
			default:
				switch rand.Intn(2) {
				case 0:
					// Register handler again
					reg, err := informer.AddEventHandlerWithResyncPeriod(funcs, 1*time.Second)
					if err != nil {
						if strings.Contains(err.Error(), "stopped already") {
							// test is over
							return
						}
						t.Errorf("failed to add handler: %v", err)
						return
					}
					handles = append(handles, reg)
				case 1:
					//  Remove a random handler
					if len(handles) == 0 {
						continue
					}

					idx := rand.Intn(len(handles))
					err := informer.RemoveEventHandler(handles[idx])
					if err != nil {
						if strings.Contains(err.Error(), "stopped already") {
							// test is over
							return
						}
						t.Errorf("failed to remove handler: %v", err)
						return
					}
					handles = append(handles[:idx], handles[idx+1:]...)
				}
			}
		}
	}

	wg := sync.WaitGroup{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			worker()
			wg.Done()
		}()
	}

	objs := []*corev1.Pod{}
	events := 10000
	if confRaceEnabled {
		events = 2000
	}

	// While workers run, randomly create events for the informer
	for i := 0; i < events; i++ {
		if len(objs) == 0 {
			// Make sure there is always an object
			obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "pod" + strconv.Itoa(i),
			}}
			objs = append(objs, obj)

			// deep copy before adding since the Modify function mutates the obj
			source.Add(obj.DeepCopy())
		}

		switch rand.Intn(3) {
		case 0:
			// Add Object
			obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "pod" + strconv.Itoa(i),
			}}
			objs = append(objs, obj)
			source.Add(obj.DeepCopy())
		case 1:
			// Update Object
			idx := rand.Intn(len(objs))
			source.Modify(objs[idx].DeepCopy())

		case 2:
			// Remove Object
			idx := rand.Intn(len(objs))
			source.Delete(objs[idx].DeepCopy())
			objs = append(objs[:idx], objs[idx+1:]...)
		}
	}

	// sotp informer which stops workers. stopping informer first to exercise
	// contention for informer while it is closing
	informerCancel()

	// wait for workers to finish since they may throw errors
	wg.Wait()
}
