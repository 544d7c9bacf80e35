package recovery

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/reflector"
)

// Version is what a recovery compares of a stored object: its UID and its
// resourceVersion.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// Plan is what a recovery's diff asks of the store.
type Plan struct {
	// Deleted are the keys whose stored object is gone from the server or
	// was replaced by another UID. The store deletes them. It tells its
	// handlers with a cache.DeletedFinalStateUnknown carrying the stored
	// object.
	Deleted []string
	// Unchanged are the keys whose stored object is current. The store
	// rewrites none of them. It gives them, as a relist's unchanged
	// objects, to handlers due for a resync.
	Unchanged []string
}

// Store is a reflector.Store as a recovery needs it (New).
// reflector.Options.ListAfter does not hold a recovery back. Unlike a
// Replace, a recovery's diff and writes are each about a few keys. The
// store orders them after whatever it owes those keys, such as a warm
// start's delivery of their stored state.
type Store interface {
	reflector.Store
	// Begin is applied in order with every write made before it. It calls
	// diff with the Version of every stored object, by key as
	// cache.MetaNamespaceKeyFunc makes them. It marks the store as owing a
	// list, durably and before anything of the plan is applied. A crash
	// until End must lead to another recovery. Then it applies the plan.
	// It returns once that is done, or with ctx's error. ErrUnsupported
	// makes the reflector list in full instead (reflector.ErrFullList).
	Begin(ctx context.Context, diff func(stored map[string]Version) (Plan, error)) error
	// Stored returns the stored object at key. A recovery calls it only
	// for a key that nothing written since Begin touched.
	Stored(key string) (interface{}, bool, error)
	// End is applied in order with every write made before it. It says the
	// store now holds the collection as of resourceVersion. The store
	// records that version and no longer owes a list.
	End(resourceVersion string) error
}
