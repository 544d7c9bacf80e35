package main

import (
	"os"
	"runtime"
	"testing"
)

// The /proc parsing is runstats' (and tested there); this is the meter's
// bookkeeping: a readable process is measured, an unreadable one is -1.
func TestCPUMeterMarksUnknownProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	m := startCPUMeter(os.Getpid(), 0)
	used := m.used()
	if used[0] < 0 {
		t.Errorf("own CPU seconds = %v, want a reading (≥ 0)", used[0])
	}
	if used[1] != -1 {
		t.Errorf("CPU of pid 0 = %v, want -1 (unknown)", used[1])
	}
	m.start[0] += 1e6 // as if the process had restarted: its counter went down
	if used := m.used(); used[0] != -1 {
		t.Errorf("CPU of a process whose counter went down = %v, want -1 (unknown)", used[0])
	}
}

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
	r := &sizeResult{Pods: 10000, PodSize: string(shapeSmall)}
	if got := r.path("out", "json"); got != "out/informerbench-10k-small.json" {
		t.Errorf("small result path = %q", got)
	}
	if r := (&sizeResult{Pods: 10000}); r.path("out", "csv") != "out/informerbench-10k.csv" || !r.realistic() {
		t.Errorf("an older result without a pod size is not saved and plotted as realistic")
	}
}
