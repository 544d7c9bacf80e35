package main

import (
	"bytes"
	"strings"
	"testing"
)

// startRun is a child result with the stages of a start.
func startRun(variant string, informerSynced, firstList float64, handlers ...float64) *childResult {
	r := &childResult{Variant: variant, InformerSyncedSeconds: informerSynced, FirstListSeconds: firstList, HandlerSyncedSeconds: handlers}
	r.SyncSeconds = max(handlers[0], handlers[1])
	return r
}

// TestStageRatios builds a two-repetition result by hand and checks the
// ratios of medians and the printed stages table.
func TestStageRatios(t *testing.T) {
	r := &sizeResult{
		runHeader: runHeader{Pods: 1000, Reps: 2}, BoltContentType: protobufContentType,
		Runs: map[string][]*childResult{
			vClientGoProto: {startRun(vClientGoProto, 4, 4.1, 4, 4), startRun(vClientGoProto, 6, 6.1, 6, 6)},
			vBoltWarm:      {startRun(vBoltWarm, 0.005, 0.5, 2, 2.2), startRun(vBoltWarm, 0.007, 0.7, 3, 2.8)},
		},
		Medians: map[string]map[string]float64{},
	}
	for v, runs := range r.Runs {
		r.Medians[v] = medians(runs)
	}
	r.Ratios = r.computeRatios()
	want := map[string]map[string]float64{
		// medians: client-go 5 / 5.1 / 5; warm 0.006 / 0.6 / 2.6 (2.2 and 3).
		vBoltWarm: {
			"informer_synced_s_x_client-go-protobuf": 0.006 / 5,
			"first_list_s_x_client-go-protobuf":      0.6 / 5.1,
			"sync_s_x_client-go-protobuf":            2.6 / 5,
		},
	}
	for v, ratios := range want {
		for name, x := range ratios {
			if got, ok := r.Ratios[v][name]; !ok || got < x*0.999 || got > x*1.001 {
				t.Errorf("ratio %s of %s = %v (present %v), want %v", name, v, got, ok, x)
			}
		}
		if len(r.Ratios[v]) != len(ratios) {
			t.Errorf("%s has ratios %v, want exactly %v", v, r.Ratios[v], ratios)
		}
	}

	var out bytes.Buffer
	_ = sizeReport(r).WriteText(&out)
	for _, s := range []string{"start stages", "0.12"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}
