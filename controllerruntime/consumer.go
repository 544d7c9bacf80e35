// Reaches into sigs.k8s.io/controller-runtime pkg/internal/source/event_handler.go at v0.25.2:
// the unexported fields handler (the user's handler.TypedEventHandler) and
// predicates ([]predicate.TypedPredicate) of EventHandler[object, request],
// the handler controller-runtime's source.Kind and source.Informer register
// on an informer. They are read by reflection and compared by identity,
// never called or changed.
//
// controller-runtime v0.25.x has no public hook to use instead. The informer
// is handed only that EventHandler, an internal type without getters.
// cache.Options.NewInformer, through which the adapter builds its
// informers, sees no handlers. Neither source.Kind nor the builder's For
// and Watches let a caller wrap or label the handler they register.
// Probing the handler, by calling OnAdd with a marked object, would run the
// user's predicates and handler. A handler of that package may lack these
// fields, because controller-runtime's layout changed. If the informer has
// checkpoints, consumerOf then says so. The informer reports it as an error
// (reportConsumerFallback). It also counts it in
// boltinformer_controllerruntime_fallbacks_total with reason
// handler-layout. Nothing is lost but time. The checkpoint's predicate or
// Secondary handler drops the same initial adds, after they are decoded.
// TestCheckpointConsumerFound pins the fields of the controller-runtime in
// use. TestConsumerFallbackReported pins the report.

package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

const (
	// crSourcePkg is the package of the handler controller-runtime's sources
	// register on informers. crVersion is the controller-runtime whose
	// layout of it consumerOf reads.
	crSourcePkg = "sigs.k8s.io/controller-runtime/pkg/internal/source"
	crVersion   = "v0.25.2"

	// fallbackHandlerLayout is the reason label of a handler of crSourcePkg
	// that consumerOf could not read.
	fallbackHandlerLayout = "handler-layout"
)

// errHandlerLayout marks a handler of crSourcePkg without controller-runtime
// crVersion's fields.
var errHandlerLayout = errors.New("not controller-runtime " + crVersion + "'s source handler layout")

// consumerOf returns the checkpoint whose consumer handler is. handler drops
// that checkpoint's acknowledged initial adds anyway, through one of the
// markers in consumers, a Checkpoint's For predicate or a Secondary
// handler. The informer can then drop the adds itself, as it queues
// them. It reads their resourceVersions from the cache file without
// decoding the objects. On a warm restart of a large collection, that
// decoding is most of the start's work. controller-runtime reports the
// handler synced and starts the workers only after it.
//
// It reads the fields handler and predicates of any struct handler points
// to (see the file's header). A handler of controller-runtime's source
// package without them is errHandlerLayout. Nothing is found then, and the
// handler is registered as any other. Other handlers are simply not
// consumers. With no consumers nothing is read.
func consumerOf(handler toolscache.ResourceEventHandler, consumers map[any]*bcache.Checkpoint) (*bcache.Checkpoint, error) {
	return consumerIn(handler, consumers, crSourcePkg)
}

// consumerIn is consumerOf with the package whose handlers must have the
// fields. That is crSourcePkg, or a test's own package for the test.
func consumerIn(handler toolscache.ResourceEventHandler, consumers map[any]*bcache.Checkpoint, sourcePkg string) (*bcache.Checkpoint, error) {
	if len(consumers) == 0 {
		return nil, nil
	}
	v := reflect.ValueOf(handler)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, nil
	}
	v = v.Elem()
	h, preds := v.FieldByName("handler"), v.FieldByName("predicates")
	if !h.IsValid() || h.Kind() != reflect.Interface || !preds.IsValid() || preds.Kind() != reflect.Slice || preds.Type().Elem().Kind() != reflect.Interface {
		if v.Type().PkgPath() == sourcePkg {
			return nil, fmt.Errorf("%s: no fields handler (an interface) and predicates (a slice of interfaces): %w", v.Type(), errHandlerLayout)
		}
		return nil, nil
	}
	// found looks an interface value up among the markers, which are
	// pointers. It compares type and address, since a value read from an
	// unexported field cannot be turned back into an interface.
	found := func(f reflect.Value) *bcache.Checkpoint {
		if f.IsNil() {
			return nil
		}
		e := f.Elem()
		if e.Kind() != reflect.Pointer {
			return nil
		}
		for marker, cp := range consumers {
			m := reflect.ValueOf(marker)
			if m.Type() == e.Type() && m.Pointer() == e.Pointer() {
				return cp
			}
		}
		return nil
	}
	if cp := found(h); cp != nil {
		return cp, nil
	}
	for j := range preds.Len() {
		if cp := found(preds.Index(j)); cp != nil {
			return cp, nil
		}
	}
	return nil, nil
}

// reportConsumerFallback reports err, which says consumerOf could not read a
// handler registered on the informer of collection. It counts the fallback
// on metrics, and nil metrics count nothing.
func reportConsumerFallback(metrics *bcache.Metrics, collection string, err error) {
	metrics.CountControllerRuntimeFallback(collection, fallbackHandlerLayout)
	utilruntime.HandleErrorWithContext(context.Background(), fmt.Errorf("boltcr: cannot tell whether a handler controller-runtime registered on %s is a checkpoint's consumer (%w); "+
		"its acknowledged initial adds are decoded and dropped by the checkpoint's predicate instead of skipped as they are queued, so warm starts are slower. "+
		"boltcr reads controller-runtime %s's private handler fields, and the controller-runtime in use has others: "+
		"pin sigs.k8s.io/controller-runtime to %[3]s, or upgrade boltinformer to a release for this controller-runtime (or file an issue)", collection, err, crVersion),
		"boltcr: checkpoint consumer not recognized", "collection", collection)
}
