package main

import (
	"testing"
	"time"
)

func TestPodShapes(t *testing.T) {
	var s podShape
	if err := s.Set("tiny"); err == nil {
		t.Error(`Set("tiny") succeeded`)
	}
	small, realistic := shapeSmall.pod(7), shapeRealistic.pod(7)
	if small.Name == realistic.Name {
		t.Errorf("both shapes name Pod 7 %q: they could not live on one cluster", small.Name)
	}
	if shapeSmall.selector() == shapeRealistic.selector() {
		t.Error("both shapes share a selector")
	}
	// Without the apiserver's defaults and managedFields (about half
	// again), a small Pod is about 1 KB, a realistic one about 2.5 KB.
	if ss, rs := small.Size(), realistic.Size(); ss*2 > rs || ss > 1500 {
		t.Errorf("small Pod %d bytes of protobuf, realistic %d: want small ≤ 1500 and under half", ss, rs)
	}
	r := &sizeResult{runHeader: runHeader{Pods: 10000, PodSize: string(shapeSmall)}}
	if got := r.name(); got != "informerbench-10k-small" {
		t.Errorf("small result name = %q", got)
	}
	if r := (&sizeResult{runHeader: runHeader{Pods: 10000}}); r.name() != "informerbench-10k" || !r.realistic() {
		t.Errorf("an older result without a pod size is not saved and plotted as realistic")
	}
}

// TestSyncedAfterWatch: the time from the first watch to synced is a
// per-run difference, negative for a start synced before its watch opened,
// and absent when no watch was recorded (client-go).
func TestSyncedAfterWatch(t *testing.T) {
	caughtUp := &childResult{InformerSyncedSeconds: 2.5, FirstWatchSeconds: 1.5, WatchesAtSync: 1, HandlerSyncedSeconds: []float64{3, 3}}
	atOpen := &childResult{InformerSyncedSeconds: 0.003, FirstWatchSeconds: 0.2, HandlerSyncedSeconds: []float64{3, 3}}
	clientGo := &childResult{InformerSyncedSeconds: 4, HandlerSyncedSeconds: []float64{4, 4}}
	if got := caughtUp.metrics()[mSyncedAfterWatch]; got != 1 {
		t.Errorf("caught up: synced after watch = %v, want 1", got)
	}
	if got := atOpen.metrics()[mSyncedAfterWatch]; got >= 0 {
		t.Errorf("synced at open: synced after watch = %v, want negative", got)
	}
	if _, ok := clientGo.metrics()[mSyncedAfterWatch]; ok {
		t.Error("client-go has a synced-after-watch figure; it records no watch")
	}

	o := newObserver()
	if first, n := o.watchesBy(time.Now()); !first.IsZero() || n != 0 {
		t.Errorf("no watch yet: first %v, %d watches", first, n)
	}
	t0 := time.Now()
	o.watches = []time.Time{t0, t0.Add(time.Second)} // as WatchStarted records them
	if first, n := o.watchesBy(t0.Add(time.Millisecond)); !first.Equal(t0) || n != 1 {
		t.Errorf("watchesBy(between the two) = %v, %d; want the first, 1", first, n)
	}
}
