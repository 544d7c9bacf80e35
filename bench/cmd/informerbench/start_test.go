package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
)

// listWatch serves a fixed list of Pods and a silent watch.
type listWatch struct{ pods []corev1.Pod }

func (lw *listWatch) List(metav1.ListOptions) (runtime.Object, error) {
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}, Items: lw.pods}, nil
}

func (lw *listWatch) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// IsWatchListSemanticsUnSupported makes client-go LIST instead of trying a
// watch-list stream, which this fake cannot serve.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func fixturePods(n int) []corev1.Pod {
	pods := make([]corev1.Pod, n)
	for i := range pods {
		pods[i] = *fixture.Pod(i)
		pods[i].Namespace = namespaceOf(i)
	}
	return pods
}

// TestTimeStartClientGo times a real client-go informer with the child's
// two handlers: the stages come in order, the first List is complete, and
// both handlers have every initial add when their registrations sync.
func TestTimeStartClientGo(t *testing.T) {
	const n = 500
	inf := cache.NewSharedIndexInformer(&listWatch{pods: fixturePods(n)}, &corev1.Pod{}, 0, podIndexers)
	h, q := &handler{}, newQueueHandler()
	defer q.queue.ShutDown()
	var regs []cache.ResourceEventHandlerRegistration
	for _, handler := range []cache.ResourceEventHandler{h, q} {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	start := time.Now()
	stop := runInformer(context.Background(), inf)
	defer stop()
	times, err := timeStart(context.Background(), start, inf, regs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := &childResult{}
	if err := times.record(res, n); err != nil {
		t.Fatal(err)
	}
	if res.InformerSyncedSeconds <= 0 || res.FirstListSeconds < res.InformerSyncedSeconds {
		t.Errorf("informer synced at %v s, first List done at %v s: want 0 < synced ≤ List", res.InformerSyncedSeconds, res.FirstListSeconds)
	}
	if len(res.HandlerSyncedSeconds) != 2 || res.SyncSeconds != max(res.HandlerSyncedSeconds[0], res.HandlerSyncedSeconds[1]) {
		t.Errorf("handlers synced at %v, SyncSeconds %v: want two, SyncSeconds the later", res.HandlerSyncedSeconds, res.SyncSeconds)
	}
	if got := h.initialAdds.Load(); got != n {
		t.Errorf("counting handler had %d initial adds at sync, want %d", got, n)
	}
	if got := q.queue.Len(); got != n {
		t.Errorf("queue handler queued %d keys at sync, want %d", got, n)
	}
	if err := times.record(res, n+1); err == nil || !strings.Contains(err.Error(), fmt.Sprint(n)) {
		t.Errorf("record with the wrong expected count = %v, want an error naming the %d listed", err, n)
	}
}

// blockingHandler never returns from its first OnAdd until released, so its
// registration cannot sync.
type blockingHandler struct{ release chan struct{} }

func (b *blockingHandler) OnAdd(interface{}, bool)           { <-b.release }
func (b *blockingHandler) OnUpdate(interface{}, interface{}) {}
func (b *blockingHandler) OnDelete(interface{})              {}

// TestTimeStartStuckHandler: a handler that never finishes its initial adds
// is reported as an error naming it, after the timeout, not as a time.
func TestTimeStartStuckHandler(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&listWatch{pods: fixturePods(10)}, &corev1.Pod{}, 0, podIndexers)
	stuck := &blockingHandler{release: make(chan struct{})}
	var regs []cache.ResourceEventHandlerRegistration
	for _, handler := range []cache.ResourceEventHandler{&handler{}, stuck} {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	stop := runInformer(context.Background(), inf)
	defer stop()
	defer close(stuck.release) // before stop: the handler must return for the informer to stop
	times, err := timeStart(context.Background(), time.Now(), inf, regs, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "handler 2 of 2 not synced") {
		t.Fatalf("timeStart with a stuck handler = %v, want handler 2 of 2 not synced", err)
	}
	if times.informerSynced == 0 || times.handlerSynced[0] == 0 {
		t.Errorf("informer synced %v, handler 1 synced %v: both should have been timed", times.informerSynced, times.handlerSynced[0])
	}
}
