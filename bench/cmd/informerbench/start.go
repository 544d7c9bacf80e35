package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// startTimes are the stages of one informer start, each counted from the
// start of informer construction (for boltinformer: before the file is
// opened), read only through client-go's public interfaces.
type startTimes struct {
	// informerSynced: the informer's HasSyncedChecker channel closed (the
	// store holds a complete list; handlers may still be receiving it).
	informerSynced time.Duration
	// firstList: a GetIndexer().List() made as soon as informerSynced was
	// seen has returned; listed is its length.
	firstList time.Duration
	listed    int
	// handlerSynced[i]: registration i's HasSyncedChecker channel closed
	// (its handler has handled every initial add).
	handlerSynced []time.Duration
}

// delivered is when the last registration reported synced: every handler
// has its initial adds.
func (t startTimes) delivered() time.Duration {
	var last time.Duration
	for _, d := range t.handlerSynced {
		last = max(last, d)
	}
	return last
}

// timeStart waits, up to timeout, for inf to report synced, then Lists its
// indexer at once (a controller's lister serving its first read), and waits
// for every registration to report synced. The registrations are watched
// from their own goroutines from the call on, so a registration that
// syncs while the List runs is timed when it does, not after the List.
// It waits on the DoneChecker channels, not on client-go's
// WaitForCacheSync, which polls every 100 ms.
func timeStart(ctx context.Context, start time.Time, inf cache.SharedIndexInformer, regs []cache.ResourceEventHandlerRegistration, timeout time.Duration) (startTimes, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := startTimes{handlerSynced: make([]time.Duration, len(regs))}
	var wg sync.WaitGroup
	for i, reg := range regs {
		done := reg.HasSyncedChecker().Done()
		wg.Go(func() {
			select {
			case <-done:
				t.handlerSynced[i] = time.Since(start)
			case <-ctx.Done():
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	// On an early return, the watchers see ctx end; wait for them, so no
	// goroutine outlives the call.
	defer func() { cancel(); <-allDone }()

	select {
	case <-inf.HasSyncedChecker().Done():
		t.informerSynced = time.Since(start)
	case <-ctx.Done():
		return t, fmt.Errorf("informer not synced %v after start: %w", timeout, context.Cause(ctx))
	}
	t.listed = len(inf.GetIndexer().List())
	t.firstList = time.Since(start)

	select {
	case <-allDone:
	case <-ctx.Done():
		<-allDone // the watchers return on ctx's end
	}
	for i, d := range t.handlerSynced {
		if d == 0 {
			return t, fmt.Errorf("handler %d of %d not synced %v after start: %w", i+1, len(regs), timeout, context.Cause(ctx))
		}
	}
	return t, nil
}

// record puts t into res, and fails if the first List did not return the
// expected objects: a List after HasSynced that misses objects is a
// correctness bug, not a slow start.
func (t startTimes) record(res *childResult, expect int) error {
	res.InformerSyncedSeconds = t.informerSynced.Seconds()
	res.FirstListSeconds = t.firstList.Seconds()
	res.HandlerSyncedSeconds = make([]float64, len(t.handlerSynced))
	for i, d := range t.handlerSynced {
		res.HandlerSyncedSeconds[i] = d.Seconds()
	}
	res.SyncSeconds = t.delivered().Seconds()
	if t.listed != expect {
		return fmt.Errorf("the first List after the informer reported synced returned %d objects, want %d", t.listed, expect)
	}
	return nil
}
