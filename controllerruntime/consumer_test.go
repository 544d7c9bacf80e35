package controllerruntime

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// TestCheckpointConsumerFound pins what consumerOf reads of the
// controller-runtime in use: the handler its source.Kind registers (as the
// builder's For and Watches do) is found to be a checkpoint's consumer
// through the For predicate among other predicates, or through a Secondary
// handler; a handler with neither is not.
func TestCheckpointConsumerFound(t *testing.T) {
	forCP, secCP := &bcache.Checkpoint{}, &bcache.Checkpoint{}
	pred := &forPredicate{cp: forCP}
	sec := &secondary{h: &handler.EnqueueRequestForObject{}}
	consumers := map[any]*bcache.Checkpoint{pred: forCP, sec: secCP}
	other := predicate.NewPredicateFuncs(func(client.Object) bool { return true })

	for _, tc := range []struct {
		name  string
		h     handler.EventHandler
		preds []predicate.Predicate
		wantC *bcache.Checkpoint
	}{
		{"For with the checkpoint's predicate", &handler.EnqueueRequestForObject{}, []predicate.Predicate{other, pred}, forCP},
		{"Watches with a Secondary handler", sec, []predicate.Predicate{other}, secCP},
		{"another controller's handler", &handler.EnqueueRequestForObject{}, []predicate.Predicate{other}, nil},
		{"another predicate of the same type", &handler.EnqueueRequestForObject{}, []predicate.Predicate{&forPredicate{cp: forCP}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := registeredHandler(t, func(c cache.Cache) source.SyncingSource {
				// What the builder's For and Watches make.
				return source.Kind(c, client.Object(&corev1.Pod{}), tc.h, tc.preds...)
			})
			if cp := consumerOf(got, consumers); cp != tc.wantC {
				t.Errorf("consumerOf(%T) = %p, want %p", got, cp, tc.wantC)
			}
		})
	}
}

// registeredHandler starts src on a cache that records the handler
// controller-runtime registers on the informer, and returns it.
func registeredHandler(t *testing.T, kind func(cache.Cache) source.SyncingSource) toolscache.ResourceEventHandler {
	t.Helper()
	inf := &recordingInformer{added: make(chan toolscache.ResourceEventHandler, 1)}
	src := kind(&recordingCache{inf: inf})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return <-inf.added
}

type recordingCache struct {
	cache.Cache
	inf *recordingInformer
}

func (c *recordingCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return c.inf, nil
}

func (c *recordingCache) WaitForCacheSync(context.Context) bool { return true }

type recordingInformer struct {
	cache.Informer
	added chan toolscache.ResourceEventHandler
}

func (i *recordingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	i.added <- h
	return synced{}, nil
}

// synced is a registration whose handler has synced.
type synced struct {
	toolscache.ResourceEventHandlerRegistration
}

func (synced) HasSynced() bool { return true }
