package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizesSortsAndDedupes(t *testing.T) {
	got, err := parseSizes("100k, 3k,30k,3000")
	if err != nil || !slices.Equal(got, []int{3000, 30000, 100000}) {
		t.Errorf("parseSizes = %v, %v; want [3000 30000 100000]", got, err)
	}
	for _, bad := range []string{"", "3k,", "0", "-1k", "lots"} {
		if got, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) = %v, want an error", bad, got)
		}
	}
}

func TestBoundedObjectsIsAShareOfAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		share string
		pods  int
		want  int
	}{{"1%", 3000, 30}, {"1%", 100000, 1000}, {"1%", 20, 1}, {"0%", 1000, 1}, {"500", 3000, 500}, {"2k", 3000, 2000}} {
		if got, err := boundedObjects(c.share, c.pods); err != nil || got != c.want {
			t.Errorf("boundedObjects(%q, %d) = %d, %v; want %d", c.share, c.pods, got, err, c.want)
		}
	}
	if _, err := boundedObjects("x%", 100); err == nil {
		t.Error("boundedObjects(x%) gave no error")
	}
}

func TestSteadyMarkIsInclusive(t *testing.T) {
	for _, c := range []struct {
		ratio, target float64
		want          string
	}{{1.0, 1.05, markMet}, {1.05, 1.05, markMet}, {1.06, 1.05, markMissed}, {0.2, 2, markMet}, {2.5, 2, markMissed}} {
		if got := steadyMark(c.ratio, c.target); got != c.want {
			t.Errorf("steadyMark(%v, %v) = %s, want %s", c.ratio, c.target, got, c.want)
		}
	}
}

// steadyChurn is a churn result at pods Pods whose boltinformer figures are
// client-go's times bolt, and boltinformer-bounded's times bounded.
func steadyChurn(pods int, bolt, bounded float64) *churnResult {
	const mb = 1 << 20
	in := func(name string, x float64) churnInformer {
		return churnInformer{Informer: name,
			Child: &churnChildResult{Drained: true, InitialAdds: int64(pods), LatencyP99Ms: 10 * x,
				Reads: &readPrices{HotGetNs: 100 * x, RandomGetNs: 200 * x, ByIndexNs: 1000 * x, ByNameNs: 300 * x, ListMs: 5 * x}},
			Summary: churnSummary{RssAnonStart: uint64(100 * x * mb), RssAnonMax: uint64(120 * x * mb), CPUMicrosPerEvent: 50 * x,
				WriteBytesPerEvent: 2048 * x, Events: 1000},
			Cold:    churnStart{SyncSeconds: 2 * x, RssAnonPeak: uint64(200 * x * mb)},
			Restart: &churnStart{RssAnonPeak: uint64(150 * x * mb), RssAnonEnd: uint64(110 * x * mb)},
		}
	}
	return &churnResult{Pods: pods, PodsAtStart: pods, CacheObjects: pods / 100,
		Informers:    []churnInformer{in(informerClientGo, 1), in(informerBolt, bolt), in(informerBoltBounded, bounded)},
		ClientGoList: &churnStart{SyncSeconds: 4, RssAnonPeak: 400 * mb}}
}

func TestSteadySummaryMarksEachSizesRatios(t *testing.T) {
	// At 3k boltinformer is 4% over client-go everywhere, bounded half of
	// it; at 30k boltinformer is 20% over, bounded three times client-go.
	small, large := steadyChurn(3000, 1.04, 0.5), steadyChurn(30000, 1.2, 3)
	large.Informers[1].Child.Drained = false
	large.Informers[2].Restart = nil // not measured: no figure, no mark
	s := steadySummary([]*churnResult{small, large}, "1%")
	if len(s.Sizes) != 2 || s.Sizes[0].BoundedObjects != 30 || s.Sizes[1].Pods != 30000 {
		t.Fatalf("sizes %+v", s.Sizes)
	}
	if len(s.Sizes[0].Warnings) != 0 || len(s.Sizes[1].Warnings) != 1 {
		t.Errorf("warnings %v, %v; want none, then one", s.Sizes[0].Warnings, s.Sizes[1].Warnings)
	}
	row := func(metric string) steadyRow {
		for _, r := range s.Rows {
			if r.Metric == metric {
				return r
			}
		}
		t.Fatalf("no row %q", metric)
		return steadyRow{}
	}
	cpu := row("CPU µs per event")
	if c := cpu.Cells[0]; *c.ClientGo != 50 || c.Bolt.Mark != markMet || c.Bounded.Mark != markMet || c.Bolt.Ratio < 1.039 || c.Bolt.Ratio > 1.041 {
		t.Errorf("3k CPU cell %+v %+v", c.Bolt, c.Bounded)
	}
	if c := cpu.Cells[1]; c.Bolt.Mark != markMissed || c.Bounded.Mark != markMissed {
		t.Errorf("30k CPU marks %s, %s; want both missed", c.Bolt.Mark, c.Bounded.Mark)
	}
	// The cold start is over client-go's LIST (4 s): 2.4 s at 30k is met.
	cold := row("cold start synced s, over client-go LIST")
	if c := cold.Cells[1]; *c.ClientGo != 4 || c.Bolt.Mark != markMet || c.Bounded.Mark != markMissed {
		t.Errorf("30k cold start over LIST: client-go %v, %+v %+v", *c.ClientGo, c.Bolt, c.Bounded)
	}
	// Reads of a few objects: only the bounded child is marked.
	get := row("Get ns, 8 hot keys")
	if c := get.Cells[1]; c.Bolt.Mark != "" || c.Bounded.Mark != markMissed || c.Bounded.Ratio != 3 {
		t.Errorf("30k hot Get %+v %+v", c.Bolt, c.Bounded)
	}
	if c := row("RssAnon MiB peak, restart (bolt warm)").Cells[1]; c.Bounded != nil || c.Bolt.Mark != markMissed {
		t.Errorf("30k restart without the bounded one: %+v %+v", c.Bolt, c.Bounded)
	}
	// Unmarked rows: write_bytes has no target.
	if c := row("write_bytes KiB per event").Cells[0]; c.Bolt.Mark != "" || *c.ClientGo != 2 {
		t.Errorf("write_bytes cell %+v, client-go %v", c.Bolt, *c.ClientGo)
	}
	// Marked per size: 3k meets every target (6 memory and CPU rows and
	// the cold start for both children, 2 reads rows for bounded); 30k
	// misses all but the bolt's cold start, the bounded restart rows
	// unmeasured.
	if s.Met != 16+1 || s.Missed != 13 {
		t.Errorf("met %d, missed %d; want 17, 13", s.Met, s.Missed)
	}

	rows := steadyTable(s)
	if got := strings.Join(rows[0], "|"); got != "|target|3k client-go|3k bolt/cg|3k bounded/cg|30k client-go|30k bolt/cg|30k bounded/cg" {
		t.Errorf("header %q", got)
	}
	var cpuRow []string
	for _, r := range rows {
		if r[0] == "CPU µs per event" {
			cpuRow = r
		}
	}
	if got := strings.Join(cpuRow, "|"); got != "CPU µs per event|≤1.1×|50|1.04 (52) [met]|0.50 (25) [met]|50|1.20 (60) [missed]|3.00 (150) [missed]" {
		t.Errorf("CPU row %q", got)
	}
	var text strings.Builder
	if err := steadyReport(s).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Targets: 17 met, 13 missed.", "missed at 30k: CPU µs per event, boltinformer 1.20× (target ≤1.1×)",
		"WARNING at 30k: boltinformer had not seen every change."} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestSteadyFigureCell(t *testing.T) {
	if got := steadyFigureCell(nil, f0); got != "-" {
		t.Errorf("nil figure: %q", got)
	}
	if got := steadyFigureCell(&steadyFigure{Value: 3.25}, f1); got != "(3.2)" && got != "(3.3)" {
		t.Errorf("figure without a ratio: %q", got)
	}
	if got := steadyFigureCell(&steadyFigure{Value: 12, Ratio: 0.5}, f0); got != "0.50 (12)" {
		t.Errorf("figure without a mark: %q", got)
	}
}
