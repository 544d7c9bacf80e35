package widgets

import "sync/atomic"

// OwnerIndexCalls reports how often the OwnerField extractor ran.
func OwnerIndexCalls() int64 { return ownerIndexCalls.Load() }

// TakeReconciles returns the Reconcile calls per Widget (namespace/name)
// since the last call, and forgets them.
func TakeReconciles() map[string]int64 {
	out := map[string]int64{}
	reconciles.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		reconciles.Delete(k)
		return true
	})
	return out
}
