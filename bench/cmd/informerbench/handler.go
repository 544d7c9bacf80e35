package main

import (
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// handler is the event handler under test: it counts the initial adds it
// is given and keeps nothing, so memory measures the informer alone. The
// counter is atomic because main reads it.
type handler struct {
	initialAdds atomic.Int64
}

func (h *handler) OnAdd(_ interface{}, isInInitialList bool) {
	if isInInitialList {
		h.initialAdds.Add(1)
	}
}

func (h *handler) OnUpdate(_, _ interface{}) {}
func (h *handler) OnDelete(interface{})      {}

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
