package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// Checkpoint spares a reconciler, on a warm restart, the objects it had
// already reconciled successfully before the restart (see cache.Checkpoint
// for the contract). A Reconcile that returns no error and no requeue
// acknowledges the request's object at the resourceVersion the cache held
// when the Reconcile began. On the next start, the initial add of an object
// still stored at that resourceVersion makes no request. Objects changed or
// created while the manager was down make requests as without a checkpoint.
// So do every change after the start, deletions and a relist's changes. A
// relist's unchanged, acknowledged objects make no request either.
//
// Use it for the reconciler's own object (the builder's For) like this:
//
//	cp, err := boltcr.NewCheckpoint(ctx, mgr.GetCache(), "widgets", &Widget{})
//	ctrl.NewControllerManagedBy(mgr).For(&Widget{}, cp.ForOption()).Complete(cp.Reconciler(r))
//
// A controller that also watches other objects (Owns, Watches) gets a
// request for every initial add of those too, which undoes the saving. So
// wrap each such handler with Secondary, which acknowledges a watched
// object once every request its event made has been reconciled
// successfully:
//
//	owned, err := cp.Secondary(ctx, &corev1.ConfigMap{},
//		handler.EnqueueRequestForOwner(scheme, mapper, &Widget{}, handler.OnlyControllerOwner()))
//	ctrl.NewControllerManagedBy(mgr).For(&Widget{}, cp.ForOption()).
//		Watches(&corev1.ConfigMap{}, owned).Complete(cp.Reconciler(r))
//
// Deletions made while the manager was down reach handlers as delete
// events, from the checkpoints' tombstones, until the reconciler has
// acknowledged them. Every handler controller-runtime registers on the
// checkpointed informers gets them, the For and Secondary ones included.
// Without checkpoints, the initial adds of what survived would have
// revealed them. Other controllers watching the same objects get those
// delete events too, perhaps for objects they were never given. A
// level-based handler makes a request whose reconcile finds nothing.
//
// Do not use it for a reconciler that must look at every object at every
// start, such as one that checks state outside the cluster. So is one
// whose result depends on other objects or configuration that may have
// changed while it was down. Change the name, or Clear, when the
// reconciler's logic changes.
type Checkpoint struct {
	name  string
	cache cache.Cache
	cp    *bcache.Checkpoint
	store toolscache.Store
	// pred is the For predicate (Predicate), which the adapter's informer
	// recognizes in the handler controller-runtime registers.
	pred *forPredicate

	// mu guards waiting, which holds per request the watched objects'
	// events (sightings) it still has to be reconciled for.
	mu      sync.Mutex
	waiting map[reconcile.Request][]*sighting
}

// sighting is one event of a watched (secondary) object. It is acknowledged
// in its checkpoint once every request it made has been reconciled
// successfully.
type sighting struct {
	sec     *bcache.Checkpoint
	key, rv string
	// Checkpoint.mu guards outstanding and open. outstanding counts the
	// requests not yet reconciled successfully. open is set while the
	// handler still runs, since it may make more.
	outstanding int
	open        bool
}

// checkpointInformer is what NewCheckpoint needs of the cache's informer.
// The adapter's informer, which embeds a boltinformer informer, has it.
type checkpointInformer interface {
	Checkpoint(name string) (*bcache.Checkpoint, error)
	GetStore() toolscache.Store
	attachCheckpoint(cp *bcache.Checkpoint, marker any)
}

// NewCheckpoint opens the named checkpoint of obj's informer in c, which
// must be a cache built by NewCache. The informer is created if needed, as
// GetInformer does. Call it before the manager starts. A multi-namespace
// cache, with several informers per object, is not supported.
func NewCheckpoint(ctx context.Context, c cache.Cache, name string, obj client.Object) (*Checkpoint, error) {
	pred := &forPredicate{}
	cp, store, err := openCheckpoint(ctx, c, name, obj, pred)
	if err != nil {
		return nil, err
	}
	pred.cp = cp
	return &Checkpoint{name: name, cache: c, cp: cp, store: store, pred: pred, waiting: map[reconcile.Request][]*sighting{}}, nil
}

// openCheckpoint opens the named checkpoint of obj's informer in c. marker,
// a *forPredicate or *secondary, is what the informer recognizes in the
// handler that is the checkpoint's consumer.
func openCheckpoint(ctx context.Context, c cache.Cache, name string, obj client.Object, marker any) (*bcache.Checkpoint, toolscache.Store, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %q: %w", name, err)
	}
	ci, ok := inf.(checkpointInformer)
	if !ok {
		return nil, nil, fmt.Errorf("checkpoint %q: the cache's informer for %T is a %T, not boltinformer's single informer (is the manager's NewCache boltcr.NewCache, with one namespace or all?)", name, obj, inf)
	}
	cp, err := ci.Checkpoint(name)
	if err != nil {
		if errors.Is(err, bcache.ErrNoCheckpoints) {
			return nil, nil, fmt.Errorf("checkpoint %q: %T is kept in memory only (a Secret without Options.PersistSecrets?): %w", name, obj, err)
		}
		return nil, nil, err
	}
	ci.attachCheckpoint(cp, marker)
	return cp, ci.GetStore(), nil
}

// Predicate drops the create events of the initial list for objects
// acknowledged at their stored resourceVersion. Use it on the reconciler's
// For source only, as ForOption does. The acknowledgements are of
// reconciles of the object itself.
//
// The informer recognizes the handler controller-runtime registers with
// this predicate. It drops those initial adds itself, without decoding the
// objects (see the adapter's informer). The predicate still drops them
// where the informer cannot, as for a second controller given the same
// predicate. It runs when the handler is called, after the informer queued
// the event. An object deleted meanwhile has lost its acknowledgement, so
// its initial add passes. Its request is the one its delete event makes
// anyway, since the queue holds one per key.
func (c *Checkpoint) Predicate() predicate.Predicate { return c.pred }

// forPredicate is a Checkpoint's For predicate (see Predicate).
type forPredicate struct {
	predicate.Funcs
	cp      *bcache.Checkpoint
	dropped atomic.Int64
}

func (p *forPredicate) Create(e event.CreateEvent) bool {
	if e.IsInInitialList && p.cp.Acknowledged(e.Object) {
		p.dropped.Add(1)
		return false
	}
	return true
}

// Skipped returns how many initial adds of acknowledged objects made no
// request since the checkpoint was opened.
func (c *Checkpoint) Skipped() int64 { return c.cp.Skipped() + c.pred.dropped.Load() }

// ForOption is builder.WithPredicates(c.Predicate()), for For.
func (c *Checkpoint) ForOption() builder.Predicates { return builder.WithPredicates(c.Predicate()) }

// Reconciler wraps r. A Reconcile that returns no error, Requeue false and
// RequeueAfter zero acknowledges the request's object. It acknowledges the
// resourceVersion the cache held when the Reconcile began. If the cache
// held none, it acknowledges the object's deletion. Deletions made while
// the manager was down reach the reconciler as delete events, from the
// checkpoint's tombstones, until acknowledged. An
// acknowledgement that fails is logged, and the object is then reconciled
// again after a restart.
func (c *Checkpoint) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		key := req.Name
		if req.Namespace != "" {
			key = req.Namespace + "/" + req.Name
		}
		rv := ""
		if obj, ok, err := c.store.GetByKey(key); err == nil && ok {
			if m, err := meta.Accessor(obj); err == nil {
				rv = m.GetResourceVersion()
			}
		}
		// The watched objects' events queued before this reconcile began
		// are what it sees.
		c.mu.Lock()
		taken := c.waiting[req]
		delete(c.waiting, req)
		c.mu.Unlock()
		res, err := r.Reconcile(ctx, req)
		if err != nil || !res.IsZero() {
			// Not done, so the sightings wait for a later, successful one.
			if len(taken) > 0 {
				c.mu.Lock()
				c.waiting[req] = append(taken, c.waiting[req]...)
				c.mu.Unlock()
			}
			return res, err
		}
		c.ack(ctx, c.cp, key, rv) // rv "" settles the deletion of a gone object
		var done []*sighting
		c.mu.Lock()
		for _, s := range taken {
			if s.outstanding--; s.outstanding == 0 && !s.open {
				done = append(done, s)
			}
		}
		c.mu.Unlock()
		for _, s := range done {
			c.ack(ctx, s.sec, s.key, s.rv)
		}
		return res, err
	})
}

// ack acknowledges key at rv, or its deletion if rv is "".
func (c *Checkpoint) ack(ctx context.Context, cp *bcache.Checkpoint, key, rv string) {
	var err error
	if rv == "" {
		err = cp.AckDeleted(key)
	} else {
		err = cp.AckKey(key, rv)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Acknowledging a successful reconcile failed; the object will be reconciled again after a restart")
	}
}

// Secondary wraps the event handler of a watched object type with a
// checkpoint of its own. obj is the type as given to Watches, a
// PartialObjectMetadata for a metadata-only watch. The checkpoint is named
// after c's and obj's type. The initial add of a watched object is dropped
// if it is acknowledged at its stored resourceVersion. A watched object is
// acknowledged at a version once every request its event at that version
// made has been reconciled successfully through c.Reconciler. An event that
// made no request is acknowledged at once. Use each Secondary handler with
// one Watches, and c.Reconciler as the reconciler.
func (c *Checkpoint) Secondary(ctx context.Context, obj client.Object, h handler.EventHandler) (handler.EventHandler, error) {
	s := &secondary{c: c, h: h}
	sec, _, err := openCheckpoint(ctx, c.cache, c.name+"/"+watchedName(obj), obj, s)
	if err != nil {
		return nil, err
	}
	s.sec = sec
	return s, nil
}

// watchedName names a watched object type within a checkpoint by its Go
// type. The forms that carry any kind, metadata and unstructured, add the
// kind.
func watchedName(obj client.Object) string {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.PkgPath() + "." + t.Name()
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *unstructured.Unstructured:
		name += "/" + obj.GetObjectKind().GroupVersionKind().GroupKind().String()
	}
	return name
}

// secondary is a watched object type's event handler (see Secondary).
type secondary struct {
	c   *Checkpoint
	sec *bcache.Checkpoint
	h   handler.EventHandler
}

func (s *secondary) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.IsInInitialList && s.sec.Acknowledged(e.Object) {
		return
	}
	cq := s.capture(e.Object, q)
	s.h.Create(ctx, e, cq)
	cq.done(ctx)
}

func (s *secondary) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	cq := s.capture(e.ObjectNew, q)
	s.h.Update(ctx, e, cq)
	cq.done(ctx)
}

func (s *secondary) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	cq := s.capture(e.Object, q)
	cq.sighting.rv = "" // the deletion is what gets acknowledged
	s.h.Delete(ctx, e, cq)
	cq.done(ctx)
}

func (s *secondary) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.h.Generic(ctx, e, q)
}

// capture returns q with Add and its variants recording the requests the
// handler makes for obj's state (see capturingQueue).
func (s *secondary) capture(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) *capturingQueue {
	key := obj.GetName()
	if obj.GetNamespace() != "" {
		key = obj.GetNamespace() + "/" + key
	}
	return &capturingQueue{TypedRateLimitingInterface: q, c: s.c,
		sighting: &sighting{sec: s.sec, key: key, rv: obj.GetResourceVersion(), open: true}}
}

// capturingQueue is the queue a secondary handler is given for one event. A
// request is registered as waiting for the sighting before it is queued.
// So only a Reconcile that begins after the event can count it, and that
// one sees the object's state. A Reconcile already running does not count
// it, because it took its sightings when it began.
type capturingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	c        *Checkpoint
	sighting *sighting
}

func (q *capturingQueue) register(req reconcile.Request) {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	q.sighting.outstanding++
	q.c.waiting[req] = append(q.c.waiting[req], q.sighting)
}

func (q *capturingQueue) Add(req reconcile.Request) {
	q.register(req)
	q.TypedRateLimitingInterface.Add(req)
}

func (q *capturingQueue) AddRateLimited(req reconcile.Request) {
	q.register(req)
	q.TypedRateLimitingInterface.AddRateLimited(req)
}

func (q *capturingQueue) AddAfter(req reconcile.Request, d time.Duration) {
	q.register(req)
	q.TypedRateLimitingInterface.AddAfter(req, d)
}

// done is called when the handler has returned, and acknowledges a
// sighting that made no request or whose requests were all reconciled.
func (q *capturingQueue) done(ctx context.Context) {
	q.c.mu.Lock()
	q.sighting.open = false
	ack := q.sighting.outstanding == 0
	q.c.mu.Unlock()
	if ack {
		q.c.ack(ctx, q.sighting.sec, q.sighting.key, q.sighting.rv)
	}
}

// Len returns the number of acknowledged objects.
func (c *Checkpoint) Len() int { return c.cp.Len() }

// Clear drops every acknowledgement, so the next start reconciles every
// object.
func (c *Checkpoint) Clear() error { return c.cp.Clear() }

// Close releases the checkpoint's name.
func (c *Checkpoint) Close() { c.cp.Close() }
