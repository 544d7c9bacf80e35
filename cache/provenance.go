package cache

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

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
	// AtomicEvents). So it is the resourceVersion of a list or an event,
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

// checkProvenance learns the cluster's identity, retrying with backoff
// while Persistence.Cluster fails, and empties the collection if it was
// stored under another provenance. It returns false if ctx ended first.
func (s *Informer) checkProvenance(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	p := s.opts.Persistence
	return s.retry(ctx, func() error {
		cluster := ""
		if p.Cluster != nil {
			var err error
			if cluster, err = p.Cluster(ctx); err != nil {
				return fmt.Errorf("boltinformer: collection %q: the cluster's identity is not known yet (%w); nothing stored is resumed until it is", s.name, err)
			}
		}
		s.life.mu.Lock()
		transform := s.life.transform
		s.life.mu.Unlock()
		want := map[string]string{
			provenanceList:      p.ListIdentity,
			provenanceCluster:   cluster,
			provenanceTransform: versioned(p.TransformVersion, transform),
			provenanceQueue:     queueAtomic,
		}
		mismatch, err := s.persistent.coll.CheckProvenance(ctx, want)
		if err != nil {
			return fmt.Errorf("boltinformer: collection %q: checking what it was stored under: %w", s.name, err)
		}
		if mismatch != nil {
			reason := resetReason(mismatch)
			logger.Info("Stored collection does not match this informer; it was emptied and the informer starts cold", "collection", s.name, "reason", reason, "detail", mismatch.Error())
			s.opts.Metrics.countReset(s.name, reason)
		}
		return nil
	})
}

// retry calls fn until it succeeds. It reports each error to the watch
// error handler and waits with the reflector's backoff in between. That is
// client-go's 800ms doubling to 30s, unless InformerOptions say otherwise.
// It returns false if ctx ended first.
func (s *Informer) retry(ctx context.Context, fn func() error) bool {
	delay, maxDelay := s.opts.InitialBackoff, s.opts.MaxBackoff
	if delay <= 0 {
		delay = 800 * time.Millisecond // client-go's reflector backoff
	}
	if maxDelay <= 0 {
		maxDelay = 30 * time.Second
	}
	for {
		err := fn()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.report(ctx, err)
		select {
		case <-ctx.Done():
			return false
		case <-s.clock.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}
