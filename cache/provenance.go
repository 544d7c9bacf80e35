package cache

import (
	"github.com/boltinformer/boltinformer/persist"
)

// What a collection records about where its objects come from (see
// persist.CollectionOptions.Provenance). A collection is only resumed, or
// handed out, under the provenance it was written under.
const (
	provenanceList      = "list"      // Persistence.ListIdentity
	provenanceCluster   = "cluster"   // what Persistence.Cluster returned; "" without one
	provenanceTransform = "transform" // TransformVersion | the transform's Go name
	// provenanceQueue records that the stored resourceVersion follows a
	// queue that reports list resourceVersions and bookmarks (RealFIFO with
	// AtomicEvents), so it is the resourceVersion of a list or an event,
	// never an older object's.
	provenanceQueue = "queue"
	queueAtomic     = "atomic-events"
)

// Reasons a collection's stored state is set aside, as logged and counted in
// boltinformer_collection_resets_total.
const (
	resetListIdentity = "list_identity" // stored under another ListIdentity
	resetCluster      = "cluster"       // stored from another cluster
	resetTransform    = "transform"     // stored under another transform
	resetQueueMode    = "queue_mode"    // stored by a queue that did not record list resourceVersions
	resetUnrecorded   = "unrecorded"    // written before provenance was recorded
	resetReadError    = "read_error"    // the stored state could not be read back
	resetUnencodable  = "unencodable"   // an object could not be stored: the informer moved to memory
)

// resetReason names the first mismatching provenance entry, in the order
// that best explains it.
func resetReason(m *persist.ProvenanceMismatch) string {
	if len(m.Stored) == 0 {
		return resetUnrecorded
	}
	for _, r := range []struct{ key, reason string }{
		{provenanceCluster, resetCluster},
		{provenanceList, resetListIdentity},
		{provenanceTransform, resetTransform},
		{provenanceQueue, resetQueueMode},
	} {
		for _, k := range m.Keys {
			if k == r.key {
				return r.reason
			}
		}
	}
	return resetListIdentity
}
