package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podWatch follows the Pods of one namespace through a client-go informer
// of the test's own and lets a test wait for a condition on them.
type podWatch struct {
	mu      sync.Mutex
	node    map[string]string // Pod name → spec.nodeName
	changed chan struct{}     // closed and replaced on every change
	stop    context.CancelFunc
	done    chan struct{}
}

func watchPods(t testing.TB, cs kubernetes.Interface, ns string) *podWatch {
	t.Helper()
	w := &podWatch{node: map[string]string{}, changed: make(chan struct{}), done: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	set := func(obj interface{}) {
		pod := obj.(*corev1.Pod)
		w.update(func() { w.node[pod.Name] = pod.Spec.NodeName })
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj interface{}) { set(obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			pod := obj.(*corev1.Pod)
			w.update(func() { delete(w.node, pod.Name) })
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	f.Start(ctx.Done())
	go func() {
		defer close(w.done)
		<-ctx.Done()
		f.Shutdown()
	}()
	t.Cleanup(w.close)
	return w
}

func (w *podWatch) close() {
	w.stop()
	<-w.done
}

func (w *podWatch) update(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn()
	close(w.changed)
	w.changed = make(chan struct{})
}

// counts returns how many Pods there are and how many are bound.
func (w *podWatch) counts() (pods, bound int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.node {
		if n != "" {
			bound++
		}
	}
	return len(w.node), bound
}

// waitFor returns once cond holds on (pods, bound), checking at every
// change; it fails the test after timeout, or at once if the component c
// (if any) exits.
func (w *podWatch) waitFor(t testing.TB, timeout time.Duration, what string, c *component, cond func(pods, bound int) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		pods, bound := w.counts()
		if cond(pods, bound) {
			return
		}
		var exited <-chan struct{}
		if c != nil {
			exited = c.exited
		}
		select {
		case <-changed:
		case <-exited:
			c.running(t)
		case <-deadline.C:
			msg := ""
			if c != nil {
				msg = c.tail(30)
			}
			t.Fatalf("timed out after %v waiting for %s: %d Pods, %d bound\n%s", timeout, what, pods, bound, msg)
		}
	}
}
