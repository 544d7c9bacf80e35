package controllerruntime

import (
	"reflect"

	toolscache "k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// consumerOf returns the checkpoint whose consumer handler is: the one whose
// acknowledged initial adds it drops anyway, through a Checkpoint's For
// predicate or a Secondary handler (the markers in consumers). The informer
// can then drop them itself, as it queues them, reading resourceVersions from
// the cache file without decoding the objects: on a warm restart of a
// large collection that is most of the start's work (at 100,000 Pods,
// seconds of decoding before controller-runtime reports the handler synced
// and starts the workers).
//
// controller-runtime gives the informer only the handler its source.Kind
// made: internal/source.EventHandler (pkg/internal/source/event_handler.go,
// v0.25.2), whose unexported fields hold the user's handler (`handler`) and
// predicates (`predicates`). They are read here by reflection, compared by
// identity, never called or changed. If a later controller-runtime renames
// them nothing is found, the handler is registered as any other, and the
// predicate and the Secondary handler drop the same initial adds later, in
// the handler's goroutine (TestCheckpointConsumerFound pins the version in
// use).
func consumerOf(handler toolscache.ResourceEventHandler, consumers map[any]*bcache.Checkpoint) *bcache.Checkpoint {
	if len(consumers) == 0 {
		return nil
	}
	v := reflect.ValueOf(handler)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	// found looks an interface value up among the markers, which are
	// pointers: by type and address, since a value read from an unexported
	// field cannot be turned back into an interface.
	found := func(f reflect.Value) *bcache.Checkpoint {
		if f.Kind() != reflect.Interface || f.IsNil() {
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
	if cp := found(v.FieldByName("handler")); cp != nil {
		return cp
	}
	if preds := v.FieldByName("predicates"); preds.Kind() == reflect.Slice {
		for j := range preds.Len() {
			if cp := found(preds.Index(j)); cp != nil {
				return cp
			}
		}
	}
	return nil
}
