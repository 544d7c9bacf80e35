package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// fieldIndexPrefix is how controller-runtime names the index behind
// IndexField(obj, field, ...), as internal.FieldIndexName in
// pkg/cache/internal/cache_reader.go, v0.25.2 does.
const fieldIndexPrefix = "field:"

// errNoExtractor ends an index build that an informer's open asked for
// before IndexField supplied the extractor.
var errNoExtractor = errors.New("field index extractor not given yet")

// fieldSlot stands in for the extractor of a declared field index. The
// informer opens with slot.index as that index's function. The stored
// index, recorded under the slot's Go name and the declared version, is
// then reused without a build. IndexField later fills in the extractor.
//
// Every slot shares one Go name, so the declared version alone tells
// extractors apart. That is why only declared fields get a slot.
type fieldSlot struct {
	mu      sync.RWMutex
	extract toolscache.IndexFunc // nil until IndexField
	// opening is set while the informer opens its collection. An index
	// build then must not run without the extractor. It sets asked instead,
	// so that the open is retried without this slot.
	opening, asked bool
}

func (s *fieldSlot) index(obj interface{}) ([]string, error) {
	s.mu.RLock()
	extract, opening := s.extract, s.opening
	s.mu.RUnlock()
	if extract != nil {
		return extract(obj)
	}
	if opening {
		s.mu.Lock()
		s.asked = true
		s.mu.Unlock()
		return nil, errNoExtractor
	}
	// The informer runs before IndexField named the extractor, and nothing
	// can be indexed yet. AddIndexers refuses the extractor once it has
	// started.
	return nil, nil
}

// runState is where an informer is in its life (see informer).
type runState int

const (
	idle      runState = iota // not run yet
	running                   // RunWithContext entered
	abandoned                 // removed before it ran; never runs
)

// informer is a boltinformer informer as controller-runtime's cache sees
// it, plus what the adapter needs. That is its field index slots, and a
// signal when its collection is released. After RemoveInformer, the signal
// lets the same list be opened again.
type informer struct {
	*bcache.Informer
	key objectKey
	// collection names the informer's collection. metrics counts what the
	// adapter could not do on it, and nil counts nothing.
	collection string
	metrics    *bcache.Metrics

	// bound are the declared field indexes opened with their slot as the
	// function. unbound are declared ones whose stored index had to be
	// rebuilt. AddIndexers builds those with the slot once the extractor is
	// known. So the next open finds them under the slot's identity.
	bound, unbound map[string]*fieldSlot

	// mu guards state, filled and checkpoints.
	mu     sync.Mutex
	state  runState
	filled map[string]bool
	// checkpoints are the boltcr checkpoints opened on this informer. Every
	// handler controller-runtime registers here is given their tombstones
	// when it joins (see Checkpoint). consumers maps each one's marker (see
	// consumerOf) to it.
	checkpoints []*bcache.Checkpoint
	consumers   map[any]*bcache.Checkpoint
	// released is closed once the informer will not touch its collection
	// again. That is after it ran, or when it is abandoned.
	released chan struct{}
}

// RunWithContext runs the informer unless it was abandoned.
func (i *informer) RunWithContext(ctx context.Context) {
	i.mu.Lock()
	if i.state != idle {
		i.mu.Unlock()
		return
	}
	i.state = running
	i.mu.Unlock()
	defer close(i.released)
	i.Informer.RunWithContext(ctx)
}

// Run implements toolscache.SharedInformer.
func (i *informer) Run(stopCh <-chan struct{}) {
	i.RunWithContext(wait.ContextForChannel(stopCh))
}

// release makes sure the informer's collection is closed. An informer that
// never ran is abandoned, and its collection closed here. One that runs is
// waited for until ctx ends, its stop already closed by the caller.
func (i *informer) release(ctx context.Context) error {
	i.mu.Lock()
	if i.state == idle {
		i.state = abandoned
		i.mu.Unlock()
		defer close(i.released)
		if p := i.Indexer(); p != nil {
			return p.Collection().Close(ctx)
		}
		return nil
	}
	i.mu.Unlock()
	select {
	case <-i.released:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the removed informer to release its collection: %w", context.Cause(ctx))
	}
}

// attachCheckpoint makes handlers registered from now on get cp's
// tombstones. It makes the handler that carries marker cp's consumer.
func (i *informer) attachCheckpoint(cp *bcache.Checkpoint, marker any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.checkpoints = append(i.checkpoints, cp)
	if i.consumers == nil {
		i.consumers = map[any]*bcache.Checkpoint{}
	}
	i.consumers[marker] = cp
}

// AddEventHandler implements toolscache.SharedInformer (see
// AddEventHandlerWithOptions).
func (i *informer) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements toolscache.SharedInformer (see
// AddEventHandlerWithOptions).
func (i *informer) AddEventHandlerWithResyncPeriod(handler toolscache.ResourceEventHandler, resyncPeriod time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{ResyncPeriod: &resyncPeriod})
}

// AddEventHandlerWithOptions registers handler. On an informer with boltcr
// checkpoints, it also gives the handler their tombstones when it joins.
// controller-runtime registers a controller's handlers after the informer
// started. So a deletion made while the manager was down, applied before
// that, would otherwise reach no checkpointed reconciler. The handler
// that is a checkpoint's consumer (consumerOf) is registered as the
// checkpoint's handler. The initial adds it acknowledged are then dropped
// as they are queued, without being decoded.
func (i *informer) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, options toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	cps := append([]*bcache.Checkpoint(nil), i.checkpoints...)
	consumers := i.consumers
	i.mu.Unlock()
	cp, err := consumerOf(handler, consumers)
	if err != nil {
		reportConsumerFallback(i.metrics, i.collection, err)
	}
	if cp != nil {
		reg, err := cp.AddEventHandlerWithTombstones(handler, options, cps...)
		if !errors.Is(err, bcache.ErrCheckpointHasHandler) {
			return reg, err
		}
		// A second controller given the same For predicate, whose predicate
		// does the skipping.
	}
	return i.Informer.AddEventHandlerWithTombstones(handler, options, cps...)
}

// AddIndexers fills declared field index slots with their extractors and
// adds every other index to the informer.
func (i *informer) AddIndexers(indexers toolscache.Indexers) error {
	rest := toolscache.Indexers{}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.filled == nil {
		i.filled = map[string]bool{}
	}
	for name, fn := range indexers {
		slot := i.bound[name]
		if slot == nil {
			slot = i.unbound[name]
		}
		if slot == nil {
			rest[name] = fn
			continue
		}
		if i.filled[name] {
			return fmt.Errorf("indexer conflict: %q already exists", name)
		}
		if i.bound[name] != nil && i.state != idle {
			return fmt.Errorf("boltinformer: field index %q is declared in Object.FieldIndexVersions and must be added (IndexField) before the cache starts", name)
		}
		slot.mu.Lock()
		slot.extract = fn
		slot.mu.Unlock()
		i.filled[name] = true
		if i.unbound[name] != nil {
			rest[name] = slot.index
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return i.Informer.AddIndexers(rest)
}

var _ toolscache.SharedIndexInformer = (*informer)(nil)
