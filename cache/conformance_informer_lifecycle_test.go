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
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// Lifecycle ports of client-go v0.37.2 shared_informer_test.go (see
// conformance_informer_test.go for how they were adapted): start and stop
// states, handlers added or removed on running and stopped informers,
// shutdown without leaked goroutines, panicking handlers.

func TestConformanceStateSharedInformer(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)
	listener := newConfTestListener("listener", 0, "pod1")
	_, _ = informer.AddEventHandlerWithResyncPeriod(listener, listener.resyncPeriod)

	if informer.HasStarted() {
		t.Fatalf("informer already started after creation")
	}
	if informer.IsStopped() {
		t.Fatalf("informer already stopped after creation")
	}
	var wg wait.Group
	stop := make(chan struct{})
	wg.StartWithChannel(stop, informer.Run)
	defer wg.Wait()
	if !listener.ok() {
		t.Errorf("informer did not report initial objects")
		close(stop)
		return
	}

	if !informer.HasStarted() {
		t.Errorf("informer does not report to be started although handling events")
		close(stop)
		return
	}
	if informer.IsStopped() {
		t.Errorf("informer reports to be stopped although stop channel not closed")
		close(stop)
		return
	}

	close(stop)
	if err := poll.Wait(time.Second, informer.IsStopped); err != nil {
		t.Errorf("informer reports not to be stopped although stop channel closed")
		return
	}
	if !informer.HasStarted() {
		t.Errorf("informer reports not to be started after it has been started and stopped")
	}
}

func TestConformanceAddOnStoppedSharedInformer(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)
	listener := newConfTestListener("listener", 0, "pod1")
	stop := make(chan struct{})
	var wg wait.Group
	wg.StartWithChannel(stop, informer.Run)
	defer wg.Wait()
	close(stop)

	if err := poll.Wait(2*time.Second, informer.IsStopped); err != nil {
		t.Fatalf("informer reports not to be stopped although stop channel closed")
	}

	_, err := informer.AddEventHandlerWithResyncPeriod(listener, listener.resyncPeriod)
	if err == nil {
		t.Fatalf("stopped informer did not reject add handler")
	}
	if !strings.HasSuffix(err.Error(), "was not added to shared informer because it has stopped already") {
		t.Errorf("adding handler to a stopped informer yields unexpected error: %s", err)
	}
}

func TestConformanceRemoveOnStoppedSharedInformer(t *testing.T) {
	source := newConfFakeSource(t)
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	informer := newConfInformer(t, source, 1*time.Second)
	listener := newConfTestListener("listener", 0, "pod1")
	handle, err := informer.AddEventHandlerWithResyncPeriod(listener, listener.resyncPeriod)
	if err != nil {
		t.Fatalf("informer did not add handler: %s", err)
	}
	stop := make(chan struct{})
	var wg wait.Group
	wg.StartWithChannel(stop, informer.Run)
	defer wg.Wait()
	close(stop)
	if err := poll.Wait(time.Second, informer.IsStopped); err != nil {
		t.Fatalf("informer reports not to be stopped although stop channel closed")
	}
	if err := informer.RemoveEventHandler(handle); err != nil {
		t.Errorf("informer does not remove handler on stopped informer: %v", err)
	}
}

func TestConformanceRemoveWhileActive(t *testing.T) {
	// source simulates an apiserver object endpoint.
	source := newConfFakeSource(t)

	informer := newConfInformer(t, source, 0)

	listener := newConfTestListener("listener", 0, "pod1")
	handle, _ := informer.AddEventHandler(listener)

	stop := confRunInformer(informer)
	defer stop()

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	if !listener.ok() {
		t.Fatalf("event did not occur")
	}

	if err := informer.RemoveEventHandler(handle); err != nil {
		t.Fatal(err)
	}

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2"}})

	if !listener.ok() {
		t.Errorf("unexpected event occurred: %v", listener.received())
	}
}

func TestConformanceAddWhileActive(t *testing.T) {
	// source simulates an apiserver object endpoint.
	source := newConfFakeSource(t)

	informer := newConfInformer(t, source, 0)
	listener1 := newConfTestListener("originalListener", 0, "pod1")
	listener2 := newConfTestListener("listener2", 0, "pod1", "pod2")
	handle1, _ := informer.AddEventHandler(listener1)

	if handle1.HasSynced() {
		t.Error("Synced before Run??")
	}

	stop := confRunInformer(informer)
	defer stop()

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	if !listener1.ok() {
		t.Fatalf("events on listener1 did not occur")
	}

	select {
	case <-handle1.HasSyncedChecker().Done():
		if !handle1.HasSynced() {
			t.Error("Not synced after channel said we are synced??")
		}
	case <-time.After(10 * time.Second):
		t.Error("Not synced 10 seconds after Run??")
	}

	listener2.lock.Lock() // ensure we observe it before it has synced
	handle2, _ := informer.AddEventHandler(listener2)
	if handle2.HasSynced() {
		t.Error("Synced before processing anything?")
	}
	listener2.lock.Unlock() // permit it to proceed and sync

	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod2"}})

	if !listener2.ok() {
		t.Fatalf("event on listener2 did not occur")
	}

	if !handle2.HasSynced() {
		t.Error("Not synced even after processing?")
	}

	listener1.expectedItemNames = listener2.expectedItemNames
	if !listener1.ok() {
		t.Errorf("events on listener1 did not occur")
	}
}

// confNoLeaks stands in for goleak.VerifyTestMain: it fails t if goroutines
// running code of the informer's packages (ours, client-go's tools/cache,
// bbolt, apimachinery's watch) started since before and are still there
// after a few seconds.
func confNoLeaks(t *testing.T) func() {
	t.Helper()
	before := confInformerGoroutines()
	return func() {
		t.Helper()
		var leaked []string
		_ = poll.Wait(5*time.Second, func() bool {
			leaked = leaked[:0]
			for id, stack := range confInformerGoroutines() {
				if _, ok := before[id]; !ok {
					leaked = append(leaked, stack)
				}
			}
			return len(leaked) == 0
		})
		for _, s := range leaked {
			t.Errorf("goroutine still running after the test:\n%s", s)
		}
	}
}

var confInformerFrame = regexp.MustCompile(`github\.com/boltinformer/boltinformer/(cache|persist|processor|reflector)\.|k8s\.io/client-go/tools/cache\.|go\.etcd\.io/bbolt\.|k8s\.io/apimachinery/pkg/watch\.`)

func confInformerGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		if confInformerFrame.Match(g) && bytes.HasPrefix(header, []byte("goroutine ")) {
			id := strings.Fields(string(header))[1]
			out[id] = string(g)
		}
	}
	return out
}

// TestConformanceShutdown checks (as client-go's TestShutdown with goleak)
// that all goroutines really have stopped in the different scenarios.
func TestConformanceShutdown(t *testing.T) {
	t.Run("no-context", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 1*time.Second)
		defer confNoLeaks(t)()
		handler, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(_ any) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := informer.RemoveEventHandler(handler); err != nil {
				t.Error(err)
			}
		}()
		stop := confRunInformer(informer)
		defer stop()
		if err := poll.Wait(time.Minute, informer.HasSynced); err != nil {
			t.Fatal("informer has not synced")
		}
	})

	t.Run("no-context-later", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 1*time.Second)
		defer confNoLeaks(t)()
		stop := confRunInformer(informer)
		defer stop()
		if err := poll.Wait(time.Minute, informer.HasSynced); err != nil {
			t.Fatal("informer has not synced")
		}
		handler, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(_ any) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := informer.RemoveEventHandler(handler); err != nil {
			t.Error(err)
		}
	})

	t.Run("no-run", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 1*time.Second)
		defer confNoLeaks(t)()
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(_ any) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		// At this point, neither informer nor handler have any goroutines running
		// and it doesn't matter that nothing gets stopped or removed.
	})
}

// confThreadSafeBuffer is client-go's threadSafeBuffer.
type confThreadSafeBuffer struct {
	buffer bytes.Buffer
	mu     sync.Mutex
}

func (b *confThreadSafeBuffer) Write(p []byte) (n int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.Write(p)
}

func (b *confThreadSafeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.String()
}

func TestConformanceEventPanics(t *testing.T) {
	var (
		buffer confThreadSafeBuffer
		logger klog.Logger
		source confFakeSource
	)

	init := func(t *testing.T) {
		t.Cleanup(klog.CaptureState().Restore) //nolint:logcheck // as in client-go's test
		buffer.mu.Lock()
		buffer.buffer.Reset()
		buffer.mu.Unlock()
		logger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buffer)))
		oldReallyCrash := utilruntime.ReallyCrash
		utilruntime.ReallyCrash = false
		t.Cleanup(func() { utilruntime.ReallyCrash = oldReallyCrash })

		source = newConfFakeSource(t)
		source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})
	}

	newHandler := func(ctx context.Context) cache.ResourceEventHandlerFuncs {
		logger := klog.FromContext(ctx)
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				logger.Info("Add func will panic now", "pod", klog.KObj(obj.(*corev1.Pod)))
				panic("fake panic")
			},
		}
	}
	_, panicFile, panicLine, _ := runtime.Caller(0)
	panicLine -= 4
	panicFile = filepath.Base(panicFile)
	expectedLog := func(name string) string {
		if name == "" {
			return fmt.Sprintf(`%s:%d] "Observed a panic" panic="fake panic"`, panicFile, panicLine)
		}
		return fmt.Sprintf(`%s:%d] "Observed a panic" logger=%q panic="fake panic"`, panicFile, panicLine, name)
	}
	handler := newHandler(context.Background())

	t.Run("simple", func(t *testing.T) {
		init(t)
		klog.SetLogger(logger)
		informer := newConfInformer(t, source, 1*time.Second)
		handle, err := informer.AddEventHandler(handler)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := informer.RemoveEventHandler(handle); err != nil {
				t.Error(err)
			}
		}()
		stop := make(chan struct{})
		var wg wait.Group
		wg.StartWithChannel(stop, informer.Run)
		defer func() {
			close(stop)
			if err := poll.Wait(time.Minute, informer.IsStopped); err != nil {
				t.Error("informer has not stopped")
			}
			wg.Wait() // For race detector...
		}()
		if err := poll.Wait(time.Minute, informer.HasSynced); err != nil {
			t.Fatal("informer has not synced")
		}
		if err := poll.Wait(time.Minute, func() bool { return strings.Contains(buffer.String(), expectedLog("")) }); err != nil {
			t.Errorf("handler has not panicked, or not logged as client-go does; log:\n%s\nwant a line containing %s", buffer.String(), expectedLog(""))
		}
	})

	t.Run("many", func(t *testing.T) {
		init(t)
		// One pod was already created in init, add some more.
		numPods := 3
		for i := 1; i < numPods; i++ {
			source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod%d", i+1)}})
		}
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		informer := newConfInformer(t, source, 1*time.Second)
		name1 := "fake-event-handler-1"
		logger1 := klog.LoggerWithName(logger, name1)
		ctx1 := klog.NewContext(ctx, logger1)
		handle1, err := informer.AddEventHandlerWithOptions(newHandler(ctx1), cache.HandlerOptions{Logger: &logger1})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := informer.RemoveEventHandler(handle1); err != nil {
				t.Error(err)
			}
		}()
		name2 := "fake-event-handler-2"
		logger2 := klog.LoggerWithName(logger, name2)
		ctx2 := klog.NewContext(ctx, logger2)
		handle2, err := informer.AddEventHandlerWithOptions(newHandler(ctx2), cache.HandlerOptions{Logger: &logger2})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := informer.RemoveEventHandler(handle2); err != nil {
				t.Error(err)
			}
		}()

		start := time.Now()
		var wg wait.Group
		informerLogger := klog.LoggerWithName(logger, "informer")
		informerCtx := klog.NewContext(ctx, informerLogger)
		wg.StartWithContext(informerCtx, informer.RunWithContext)
		defer func() {
			cancel()
			if err := poll.Wait(time.Minute, informer.IsStopped); err != nil {
				t.Error("informer has not stopped")
			}
			wg.Wait() // For race detector...
		}()
		if err := poll.Wait(time.Minute, informer.HasSynced); err != nil {
			t.Fatal("informer has not synced")
		}
		if err := poll.Wait(30*time.Second, func() bool {
			output := buffer.String()
			return numOccurrencesConf(output, expectedLog(name1)) == numPods && numOccurrencesConf(output, expectedLog(name2)) == numPods
		}); err != nil {
			t.Errorf("want %d panics logged per handler (%q, %q), got log:\n%s", numPods, expectedLog(name1), expectedLog(name2), buffer.String())
		}

		// Both handlers should have slept for one second after each panic,
		// except after the last pod event because then the input channel
		// gets closed.
		if d := time.Since(start); d < time.Duration(numPods-1)*time.Second {
			t.Errorf("handlers were called again %v after panicking, want at least %v between calls", d, time.Duration(numPods-1)*time.Second)
		}
	})
}

func numOccurrencesConf(hay, needle string) int {
	return strings.Count(hay, needle)
}

func TestConformanceRemoveEventHandlerAsynchronousPanic(t *testing.T) {
	source := newConfFakeSource(t)
	informer := newConfInformer(t, source, 0)

	stop := confRunInformer(informer)
	defer stop()

	scheduledPods := make(chan *corev1.Pod, 1)
	blockChan := make(chan struct{})
	handlerStarted := make(chan struct{})
	handlerFinished := make(chan struct{})
	var panicVal any
	var panicked bool

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			close(handlerStarted)
			<-blockChan
			defer close(handlerFinished)
			defer func() {
				if r := recover(); r != nil {
					panicVal = r
					panicked = true
				}
			}()
			scheduledPods <- obj.(*corev1.Pod)
		},
	}

	handle, err := informer.AddEventHandler(handler)
	if err != nil {
		t.Fatalf("Failed to add event handler: %v", err)
	}

	// Trigger the event
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	// Wait for handler to start and block
	<-handlerStarted

	// Now remove the handler. This should return immediately.
	if err := informer.RemoveEventHandler(handle); err != nil {
		t.Fatalf("Failed to remove event handler: %v", err)
	}

	// Close the channel that the handler writes to
	close(scheduledPods)

	// Unblock the handler
	close(blockChan)

	// Wait for handler to finish
	<-handlerFinished

	if !panicked {
		t.Fatalf("Expected handler to panic (send on closed channel), but it did not")
	}
	t.Logf("Caught expected panic: %v", panicVal)
}

func TestConformanceRemoveEventHandlerSynchronousShutdown(t *testing.T) {
	source := newConfFakeSource(t)
	informer := newConfInformer(t, source, 0)

	stop := confRunInformer(informer)
	defer stop()

	scheduledPods := make(chan *corev1.Pod, 1)
	blockChan := make(chan struct{})
	handlerStarted := make(chan struct{})
	handlerFinished := make(chan struct{})
	var panicVal any
	var panicked bool

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			close(handlerStarted)
			<-blockChan
			defer close(handlerFinished)
			defer func() {
				if r := recover(); r != nil {
					panicVal = r
					panicked = true
				}
			}()
			scheduledPods <- obj.(*corev1.Pod)
		},
	}

	handle, err := informer.AddEventHandler(handler)
	if err != nil {
		t.Fatalf("Failed to add event handler: %v", err)
	}

	// Trigger the event
	source.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}})

	// Wait for handler to start and block
	<-handlerStarted

	// Unblock the handler so it can run and exit
	close(blockChan)

	// Now remove the handler and wait for it to fully stop.
	if err := cache.ShutDownEventHandler(informer, handle); err != nil {
		t.Fatalf("Failed to shutdown event handler: %v", err)
	}

	// NOW it is safe to close the channel
	close(scheduledPods)

	// Wait for handler function to finish (should already be done)
	<-handlerFinished

	if panicked {
		t.Fatalf("Handler panicked unexpectedly: %v", panicVal)
	}
}

func TestConformanceShutDownEventHandlerLifecycles(t *testing.T) {
	t.Run("InformerNeverStarted", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 0)

		handle, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {}})
		if err != nil {
			t.Fatalf("Failed to add event handler: %v", err)
		}

		// Shutdown should return immediately because the informer was never started.
		if err := cache.ShutDownEventHandler(informer, handle); err != nil {
			t.Fatalf("Failed to shutdown event handler: %v", err)
		}
	})

	t.Run("StartedThenAddedThenShutDown", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 0)

		stop := confRunInformer(informer)
		defer stop()

		// Wait deterministically for the informer to sync (proving it has started)
		syncCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if !cache.WaitFor(syncCtx, "informer sync", informer.HasSyncedChecker()) {
			t.Fatalf("Informer did not sync")
		}

		handle, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {}})
		if err != nil {
			t.Fatalf("Failed to add event handler: %v", err)
		}

		if err := cache.ShutDownEventHandler(informer, handle); err != nil {
			t.Fatalf("Failed to shutdown event handler: %v", err)
		}
	})

	t.Run("AddedThenStartedThenShutDown", func(t *testing.T) {
		source := newConfFakeSource(t)
		informer := newConfInformer(t, source, 0)

		handle, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {}})
		if err != nil {
			t.Fatalf("Failed to add event handler: %v", err)
		}

		stop := confRunInformer(informer)
		defer stop()

		// Wait deterministically for the informer to sync (proving it has started)
		syncCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if !cache.WaitFor(syncCtx, "informer sync", informer.HasSyncedChecker()) {
			t.Fatalf("Informer did not sync")
		}

		if err := cache.ShutDownEventHandler(informer, handle); err != nil {
			t.Fatalf("Failed to shutdown event handler: %v", err)
		}
	})
}
