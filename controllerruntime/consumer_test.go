package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/metrictest"
)

// TestCheckpointConsumerFound pins what consumerOf reads of the
// controller-runtime in use. It takes the handler source.Kind registers,
// as the builder's For and Watches do. That handler is found to be a
// checkpoint's consumer through the For predicate among other predicates.
// It is found through a Secondary handler too. A handler with neither is
// not a consumer. The handler is of crSourcePkg,
// whose handlers consumerOf reports when it cannot read them.
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
			if pkg := reflect.TypeOf(got).Elem().PkgPath(); pkg != crSourcePkg {
				t.Errorf("controller-runtime registered a %T of %s, want one of %s (crSourcePkg)", got, pkg, crSourcePkg)
			}
			if cp, err := consumerOf(got, consumers); cp != tc.wantC || err != nil {
				t.Errorf("consumerOf(%T) = %p, %v; want %p", got, cp, err, tc.wantC)
			}
		})
	}
}

// A handler of controller-runtime's source package whose fields are not the
// ones consumerOf reads (controller-runtime changed them) is reported as an
// error and counted; the handler is registered as any other. Other handlers
// are not consumers, and are not reported. Here this test's package stands
// in for controller-runtime's.
func TestConsumerFallbackReported(t *testing.T) {
	saved := utilruntime.ErrorHandlers
	var reported []error
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...interface{}) {
		reported = append(reported, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pred := &forPredicate{cp: &bcache.Checkpoint{}}
	consumers := map[any]*bcache.Checkpoint{pred: pred.cp}
	thisPkg := reflect.TypeFor[renamedFields]().PkgPath()

	// Fields renamed: reported.
	renamed := &renamedFields{userHandler: &handler.EnqueueRequestForObject{}, preds: []predicate.Predicate{pred}}
	cp, err := consumerIn(renamed, consumers, thisPkg)
	if cp != nil || !errors.Is(err, errHandlerLayout) {
		t.Fatalf("consumerIn(renamed fields) = %p, %v; want errHandlerLayout", cp, err)
	}
	// With the fields: found, nothing reported.
	if cp, err := consumerIn(&sourceFields{handler: &handler.EnqueueRequestForObject{}, predicates: []predicate.Predicate{pred}}, consumers, thisPkg); cp != pred.cp || err != nil {
		t.Errorf("consumerIn(v0.25.2's fields) = %p, %v; want the checkpoint", cp, err)
	}
	// Another package's handler without the fields is not a consumer.
	if cp, err := consumerIn(renamed, consumers, crSourcePkg); cp != nil || err != nil {
		t.Errorf("consumerOf(a handler of another package) = %p, %v; want neither", cp, err)
	}
	// No checkpoints: nothing is read, nothing reported.
	if _, err := consumerIn(renamed, nil, thisPkg); err != nil {
		t.Errorf("consumerIn without consumers: %v", err)
	}

	reportConsumerFallback(metrics, "typed/v1/pods", fmt.Errorf("%T: %w", renamed, errHandlerLayout))
	reportConsumerFallback(nil, "typed/v1/pods", errHandlerLayout) // no metrics: reported, not counted
	if len(reported) != 2 || !errors.Is(reported[0], errHandlerLayout) {
		t.Fatalf("reported %v, want the layout error twice", reported)
	}
	for _, want := range []string{"typed/v1/pods", "decoded", "pin sigs.k8s.io/controller-runtime to " + crVersion} {
		if !strings.Contains(reported[0].Error(), want) {
			t.Errorf("report %q does not say %q", reported[0], want)
		}
	}
	if got := metrictest.CounterValue(t, reg, "boltinformer_controllerruntime_fallbacks_total", map[string]string{"collection": "typed/v1/pods", "reason": fallbackHandlerLayout}); got != 1 {
		t.Errorf("boltinformer_controllerruntime_fallbacks_total = %v, want 1", got)
	}
}

// sourceFields has the fields of controller-runtime v0.25.2's
// internal/source.EventHandler that consumerOf reads; renamedFields has
// them under other names.
type sourceFields struct {
	toolscache.ResourceEventHandlerFuncs
	handler    handler.EventHandler
	predicates []predicate.Predicate
}

type renamedFields struct {
	toolscache.ResourceEventHandlerFuncs
	userHandler handler.EventHandler
	preds       []predicate.Predicate
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
