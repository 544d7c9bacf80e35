package main

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// handler is the event handler under test: it counts what it is given and
// keeps nothing, so memory measures the informer alone. The informer calls
// it from one goroutine; the counters are atomic because main reads them.
type handler struct {
	initialAdds atomic.Int64

	// Tagged updates: those whose tick annotation starts with tag.
	tag    string
	want   int64
	tagged atomic.Int64
	last   atomic.Int64 // unix nanos of the want-th
	lastRV atomic.Uint64
	done   chan struct{} // closed at the want-th tagged update
}

func newHandler(run string, want int) *handler {
	return &handler{tag: run + "-", want: int64(want), done: make(chan struct{})}
}

func (h *handler) OnAdd(_ interface{}, isInInitialList bool) {
	if isInInitialList {
		h.initialAdds.Add(1)
	}
}

func (h *handler) OnUpdate(_, newObj interface{}) {
	if h.want == 0 {
		return
	}
	pod, ok := newObj.(*corev1.Pod)
	if !ok || !strings.HasPrefix(pod.Annotations[tickAnnot], h.tag) {
		return
	}
	now := time.Now().UnixNano()
	if h.tagged.Add(1) == h.want {
		rv, _ := strconv.ParseUint(pod.ResourceVersion, 10, 64)
		h.lastRV.Store(rv)
		h.last.Store(now)
		close(h.done)
	}
}

func (h *handler) OnDelete(interface{}) {}

// queueHandler is the second handler of every child, doing what a
// controller's handler typically does: compute the object's key and add it
// to a workqueue (client-go's, deduplicating; no worker drains it, so it
// ends up holding each key once). With two handlers the bench measures
// delivery to more than one, as a process with a controller and a second
// consumer of the same informer sees it.
type queueHandler struct {
	queue *workqueue.Typed[string]
	// keyErrors counts objects whose key could not be computed (none are
	// expected; checked after sync).
	keyErrors atomic.Int64
}

func newQueueHandler() *queueHandler {
	return &queueHandler{queue: workqueue.NewTyped[string]()}
}

func (h *queueHandler) enqueue(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		h.keyErrors.Add(1)
		return
	}
	h.queue.Add(key)
}

func (h *queueHandler) OnAdd(obj interface{}, _ bool)  { h.enqueue(obj) }
func (h *queueHandler) OnUpdate(_, newObj interface{}) { h.enqueue(newObj) }
func (h *queueHandler) OnDelete(obj interface{})       { h.enqueue(obj) }
