package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

// recoveryState is the informer's side of a recovery under way.
type recoveryState struct {
	// active is set from the diff a recovery applied until its end, or
	// until a list is applied.
	active atomic.Bool
	// gen is the read gate's generation when the last recovery took its
	// diff. blockDeltas guards it. A set-aside since then (another
	// generation) leaves the store short of what that diff saw. The end
	// compares it under writeMu, which each set-aside holds throughout.
	gen uint64
	// walkHolds holds a warm start's walk back until the store is
	// consistent again (delivery.go).
	walkHolds walkRecoveryHolds
}

// A recovery (recovery/attempt.go) replaces the full list after a 410, or
// for a list the store owes, by a metadata list, a diff against the stored
// objects' UIDs and resourceVersions, and fetches of what changed; where
// the server cannot list metadata, by one full list that serves as both,
// of which only the changed objects are decoded (recovery/fulllist.go).
// The store sees the same steps either way. Its two
// steps that need the store as the handlers know it are applied by the
// delta loop, in order with the watch events queued before and after them.
// The delta loop owns the store, and only the queue orders the steps with
// those events, so the reflector queues each step in the informer's
// RealFIFO as a *recoveryStep. handleDeltas applies it itself, never
// through processDeltas.
//
// A step rides as the object of an Updated delta, since RealFIFO has no
// delta type of a caller's own. No user object has the Go type
// recoveryStep, so every reader of a popped delta tells a step by its type
// first. client-go v0.37.2's the_real_fifo.go does two things to an item
// given to Update (addToItems_locked, :255): it asks the queue's key
// function for its key (keyOf, :197), and it hands anything but a
// cache.DeletedFinalStateUnknown to the queue's transform (:273-281). The
// informer sets both (newQueue): queueKey answers recoveryKey for a step,
// and queueTransform passes a step by. TestQueueCarriesRecoverySteps pins
// this, and fails first if a client-go version treats items otherwise.
//
//  1. Begin: the diff, against the stored Versions, once every delta queued
//     before it is applied. The collection is marked must-list (in the
//     commit before anything of the recovery: a crash from here on finds
//     the mark and recovers again); objects gone or replaced by another UID
//     are deleted, their handlers told with DeletedFinalStateUnknown
//     carrying the stored object, as client-go's relist tells them; the
//     unchanged objects are not read, written or delivered, except to
//     handlers due for a resync, which get them as a relist's unchanged
//     objects (decoded from the file). The informer is recovering from here
//     on: the store holds objects at different resourceVersions (changed
//     ones not fetched yet), so it is not caught up (synced) whatever
//     resourceVersion the store last applied. A warm start's hand-off of
//     the stored objects goes on meanwhile: the keys deleted here are
//     handed out first, as every later event's key is; only a resync of
//     the unchanged objects waits for the whole hand-off.
//  2. End: the store holds the collection at the watch's resourceVersion.
//     It is recorded, and the must-list mark cleared, in one commit; that is
//     a list applied (readers owed one go on, handlers that joined meanwhile
//     complete their joins), and the informer is no longer recovering.
//
// Between the two, the fetched objects and the watch events arrive as
// ordinary adds, updates and deletes, filtered by the recovery so that
// each key moves only forward.

// recoveryKey is the queue key of every recovery step. PopBatch never puts
// two items of one key in a batch, so each step's batch ends before the
// next step. It must be a key no object has: a Kubernetes name may hold
// ":" but never "\x00", so the key is not printable on purpose.
const recoveryKey = "\x00boltinformer/recovery"

// recoveryStep is one step of a recovery, queued under recoveryKey. It is
// the queue item itself, never wrapped in a tombstone or an object.
type recoveryStep struct {
	// Begin: ctx is the reflector's, diff computes the plan, done receives
	// the outcome (buffered).
	ctx  context.Context
	diff func(map[string]recovery.Version) (recovery.Plan, error)
	done chan error
	// End (diff nil): the resourceVersion the store is consistent at.
	rv string
}

// recoveryQueue is the informer's queue as its reflector sees it when
// recoveries are set up (InformerOptions.Recovery).
type recoveryQueue struct {
	*cache.RealFIFO
	s *Informer
}

var _ recovery.Store = recoveryQueue{}

// reflectorStore returns what the informer's reflectors write to: the
// queue, able to recover if the informer persists and recoveries are set
// up.
func (s *Informer) reflectorStore(fifo *cache.RealFIFO) reflector.Store {
	if s.persistent == nil || s.opts.Recovery == nil {
		return fifo
	}
	return recoveryQueue{RealFIFO: fifo, s: s}
}

// recoverer returns what makes q's reflector recover.
func (s *Informer) recoverer(q recoveryQueue) *recovery.Relister {
	var hooks recovery.Hooks
	if s.ready.proof != nil {
		hooks.Listed = s.ready.proof.take
	}
	if d := s.start.delivery; d != nil {
		hooks.Started = func() func() { return s.recovery.walkHolds.take(d, &s.recovery.active) }
	}
	return recovery.New(s.opts.Recovery, q, hooks)
}

// Begin implements recovery.Store.
func (q recoveryQueue) Begin(ctx context.Context, diff func(map[string]recovery.Version) (recovery.Plan, error)) error {
	step := &recoveryStep{ctx: ctx, diff: diff, done: make(chan error, 1)}
	if err := q.RealFIFO.Update(step); err != nil {
		return err
	}
	select {
	case err := <-step.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stored implements recovery.Store. It does not retry a failed
// read: the caller only needs the object for a tombstone.
func (q recoveryQueue) Stored(key string) (interface{}, bool, error) {
	return q.s.persistent.getOnce(key)
}

// End implements recovery.Store.
func (q recoveryQueue) End(resourceVersion string) error {
	return q.RealFIFO.Update(&recoveryStep{rv: resourceVersion})
}

// queueKey is the informer's queue's key function: recoveryKey for a
// recovery step, an object's namespace/name otherwise.
func queueKey(obj interface{}) (string, error) {
	if _, ok := obj.(*recoveryStep); ok {
		return recoveryKey, nil
	}
	return cache.MetaNamespaceKeyFunc(obj)
}

// queueTransform returns the informer's queue's transform: transform for
// objects, nothing for a recovery step. It is nil without a transform,
// since any transform makes the queue copy every list it is given.
func queueTransform(transform cache.TransformFunc) cache.TransformFunc {
	if transform == nil {
		return nil
	}
	return func(obj interface{}) (interface{}, error) {
		if _, ok := obj.(*recoveryStep); ok {
			return obj, nil
		}
		return transform(obj)
	}
}

// isRecoveryStep reports whether d is a recovery step.
func isRecoveryStep(d cache.Delta) bool {
	_, ok := recoveryStepOf(d)
	return ok
}

// recoveryStepOf returns the recovery step d carries, if it is one.
func recoveryStepOf(d cache.Delta) (*recoveryStep, bool) {
	step, ok := d.Object.(*recoveryStep)
	return step, ok
}

// withRecoverySteps applies deltas in order: the recovery steps among them
// itself, the runs of other deltas between them with apply. Called under
// blockDeltas.
func (s *Informer) withRecoverySteps(logger klog.Logger, deltas []cache.Delta, apply func([]cache.Delta) error) error {
	var errs []error
	from, steps := 0, false
	for i, d := range deltas {
		step, ok := recoveryStepOf(d)
		if !ok {
			continue
		}
		steps = true
		if from < i {
			err := apply(deltas[from:i])
			if errors.Is(err, errStopping) {
				// A later step may record a resourceVersion past these.
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
		s.applyRecoveryStepLocked(logger, step)
		from = i + 1
	}
	if !steps {
		return apply(deltas)
	}
	if from < len(deltas) {
		errs = append(errs, apply(deltas[from:]))
	}
	return errors.Join(errs...)
}

// applyRecoveryStepLocked applies one step. Called under blockDeltas.
func (s *Informer) applyRecoveryStepLocked(logger klog.Logger, step *recoveryStep) {
	if step.diff == nil {
		if recoveryEnding != nil {
			recoveryEnding()
		}
		// Keys set aside after the diff leave the store short of the
		// collection at step.rv. The relist owed since then completes it.
		// endList asks under writeMu, so no set-aside lands between the
		// check and the end's commit.
		current := func() bool { return s.gate.owedGen.Load() == s.recovery.gen }
		ended, err := s.persistent.endList(step.rv, current)
		if err != nil {
			s.reportLocked(klog.NewContext(context.Background(), logger), fmt.Errorf("boltinformer: collection %q: recording the recovery at resourceVersion %q: %w", s.name, step.rv, err))
		} else if !ended {
			logger.V(2).Info("A recovery ended after part of the store was set aside; waiting for the relist", "collection", s.name, "resourceVersion", step.rv)
		}
		return
	}
	step.done <- s.beginRecoveryLocked(logger, step)
}

// recoveryDiffing and recoveryEnding are test hooks. recoveryDiffing is
// called as a recovery's diff begins, after the gate's generation is read
// and before the stored versions are. recoveryEnding is called as the delta
// loop applies a recovery's end, before the end writes anything.
var recoveryDiffing, recoveryEnding func()

// beginRecoveryLocked diffs and applies a recovery's plan; see the comment
// at the top of the file. Called under blockDeltas.
func (s *Informer) beginRecoveryLocked(logger klog.Logger, step *recoveryStep) error {
	ctx := step.ctx
	if err := ctx.Err(); err != nil {
		return err // the reflector has given up on it
	}
	idx := s.persistent
	if idx.InMemory() {
		return recovery.ErrUnsupported
	}
	resyncing := s.processor.AnySyncing()
	if s.start.delivery != nil && resyncing {
		// The unchanged objects go to the handlers due for a resync: every
		// key's initial add must precede that, so the warm start's delivery
		// must be over. Otherwise the recovery touches only the keys it
		// deletes here and those it fetches or watches later, each handed
		// out first (as any event's key), and the delivery of the rest goes
		// on meanwhile.
		if !s.start.delivery.handOutBefore(ctx, []cache.Delta{{Type: cache.ReplacedAll}}) {
			return errStopping
		}
	}
	s.recovery.gen = s.gate.owedGen.Load() // before the versions: see recoveryState.gen
	if recoveryDiffing != nil {
		recoveryDiffing()
	}
	versions, err := idx.coll.Versions()
	if err != nil {
		s.reportLocked(ctx, fmt.Errorf("boltinformer: collection %q: reading the stored versions to recover: %w; listing in full", s.name, err))
		return recovery.ErrUnsupported
	}
	stored := make(map[string]recovery.Version, len(versions))
	for k, v := range versions {
		stored[k] = recovery.Version{UID: v.UID, ResourceVersion: v.ResourceVersion}
	}
	plan, err := step.diff(stored)
	if err != nil {
		return err
	}
	if err := idx.markMustList(); err != nil {
		return err
	}
	s.recovery.active.Store(true)

	if len(plan.Deleted) > 0 {
		deltas := make([]cache.Delta, 0, len(plan.Deleted))
		for _, key := range plan.Deleted {
			deltas = append(deltas, cache.Delta{Type: cache.Deleted, Object: cache.DeletedFinalStateUnknown{Key: key}})
		}
		if s.start.delivery != nil {
			s.start.delivery.handOutBefore(ctx, deltas)
		}
		// Each tombstone carries the stored object, read after the hand-out.
		// A walk that failed may have set keys aside since the diff: no
		// handler was given those, so none is told of them.
		kept := deltas[:0]
		for _, d := range deltas {
			t := d.Object.(cache.DeletedFinalStateUnknown)
			obj, exists, err := idx.getOnce(t.Key)
			switch {
			case err != nil:
				// Reported by getOnce; no object, as client-go's reconcile does.
			case !exists && s.start.delivery != nil:
				continue
			default:
				t.Obj = obj
			}
			kept = append(kept, cache.Delta{Type: cache.Deleted, Object: t})
		}
		deltas = kept
		if err := processDeltasInBatch(logger, s, s.store, deltas, false, cache.DeletionHandlingMetaNamespaceKeyFunc); err != nil {
			return err
		}
	}
	if len(plan.Unchanged) > 0 && resyncing {
		// What client-go's relist gives the handlers due for a resync.
		for _, key := range plan.Unchanged {
			if obj, exists, err := idx.getOnce(key); err == nil && exists {
				s.onRelistUpdate(obj, obj)
			}
		}
	}
	return nil
}

// listApplied is called after the store applied a list (a Replace, or a
// recovery's end): readers owed one go on, and the informer is no longer
// recovering.
func (s *Informer) listApplied() {
	s.recovery.walkHolds.consistent(&s.recovery.active)
	s.gate.paid()
}

// appliedResourceVersion is the store's resourceVersion as far as catching
// up is concerned: none while recovering, when the store holds objects at
// different versions.
func (s *Informer) appliedResourceVersion() string {
	if s.recovery.active.Load() {
		return ""
	}
	return s.store.LastStoreSyncResourceVersion()
}
