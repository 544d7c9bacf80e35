package main

import (
	"flag"
	"io"
	"math"
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

func TestSteadyFlagsRunBothChurnsByDefault(t *testing.T) {
	parse := func(args ...string) (*steadyOptions, error) {
		o := &steadyOptions{}
		fs := flag.NewFlagSet("steady", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return o, o.complete()
	}
	o, err := parse("--out", t.TempDir())
	if err != nil || len(o.skews) != 2 || o.skews[0].String() != "uniform" || o.skews[1].String() != "zipf:1.1" {
		t.Fatalf("default skews %v, %v; want uniform, zipf:1.1", o.skews, err)
	}
	if o, err := parse("--out", t.TempDir(), "--skews", "zipf:1.5"); err != nil || len(o.skews) != 1 || o.skews[0].zipfS != 1.5 {
		t.Errorf("--skews zipf:1.5: %v, %v", o.skews, err)
	}
	if _, err := parse("--skews", "zipf:0.5"); err == nil || !strings.Contains(err.Error(), "> 1") {
		t.Errorf("--skews zipf:0.5: %v, want an error naming the exponent's bound", err)
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

// steadyFixture is a uniform churn result at pods Pods whose boltinformer
// figures are client-go's times bolt, and boltinformer-bounded's times
// bounded. Each boltinformer file's records are 6,000 bytes a Pod.
func steadyFixture(pods int, bolt, bounded float64) *churnResult {
	const mb = 1 << 20
	in := func(name string, x float64) churnInformer {
		in := churnInformer{Informer: name,
			Child: &churnChildResult{Drained: true, InitialAdds: int64(pods), LatencyP99Ms: 10 * x, Events: 1000, ChurnAllocBytes: uint64(1000 * 2048 * x),
				Reads: &readPrices{HotGetNs: 100 * x, RandomGetNs: 200 * x, ByIndexNs: 1000 * x, ByNameNs: 300 * x, ListMs: 5 * x}},
			Summary: churnSummary{RssAnonStart: uint64(100 * x * mb), RssAnonMax: uint64(120 * x * mb), CPUMicrosPerEvent: 50 * x,
				WriteBytesPerEvent: 2048 * x, Events: 1000},
			Cold:    churnStart{SyncSeconds: 2 * x, RssAnonPeak: uint64(200 * x * mb), InitialAdds: int64(pods), AllocBytes: uint64(float64(pods) * 10240 * x)},
			Restart: &churnStart{RssAnonPeak: uint64(150 * x * mb), RssAnonEnd: uint64(110 * x * mb)},
		}
		if name != informerClientGo {
			in.Child.File = &churnFile{RecordBytes: int64(pods) * 6000, Objects: pods}
			in.Child.FileBytesEnd = int64(pods) * 9000 // 1.5× the records
			in.Summary.FileBytesMax = int64(pods) * 12000
		}
		return in
	}
	return &churnResult{Pods: pods, PodsAtStart: pods, CacheObjects: pods / 100,
		Informers:    []churnInformer{in(informerClientGo, 1), in(informerBolt, bolt), in(informerBoltBounded, bounded)},
		ClientGoList: &churnStart{SyncSeconds: 4, RssAnonPeak: 400 * mb, InitialAdds: int64(pods), AllocBytes: uint64(pods) * 20480}}
}

func TestSteadySummaryMarksEachChurnsRatios(t *testing.T) {
	// At 3k boltinformer is 4% over client-go everywhere under the uniform
	// churn and 10% under it under zipf:1.1, bounded half of it; at 30k,
	// uniform only (its zipf:1.1 churn failed), boltinformer is 20% over,
	// bounded three times client-go.
	small, large := steadyFixture(3000, 1.04, 0.5), steadyFixture(30000, 1.2, 3)
	smallZipf := steadyFixture(3002, 0.9, 0.5) // the uniform churn left 2 more Pods
	smallZipf.Skew, smallZipf.Pods = "zipf:1.1", 3000
	smallZipf.Drive = churnDriveStats{DistinctUpdated: 300, UpdatesPerPodPerWindow: 5.5}
	large.Informers[1].Child.Drained = false
	large.Informers[2].Restart = nil // not measured: no figure, no mark
	s := steadySummary([]*churnResult{small, smallZipf, large}, "1%")
	if len(s.Sizes) != 2 || s.Sizes[0].BoundedObjects != 30 || s.Sizes[1].Pods != 30000 || s.Sizes[0].RecordBytes != 6000 {
		t.Fatalf("sizes %+v", s.Sizes)
	}
	if !slices.Equal(s.Skews, []string{"uniform", "zipf:1.1"}) {
		t.Errorf("skews %v", s.Skews)
	}
	if c := s.Sizes[0].Churns; len(c) != 2 || c[1].Skew != "zipf:1.1" || c[1].PodsAtStart != 3002 || c[1].DistinctUpdated != 300 || len(c[0].Warnings)+len(c[1].Warnings) != 0 {
		t.Errorf("3k churns %+v", c)
	}
	if c := s.Sizes[1].Churns; len(c) != 1 || len(c[0].Warnings) != 1 {
		t.Errorf("30k churns %+v; want one, with one warning", c)
	}
	row := func(metric, skew string) steadyRow {
		for _, r := range s.Rows {
			if r.Metric == metric && r.Churn == skew {
				return r
			}
		}
		t.Fatalf("no row %q, %s", metric, skew)
		return steadyRow{}
	}
	cpu := row("CPU µs per event", "uniform")
	if c := cpu.Cells[0]; *c.ClientGo != 50 || c.Bolt.Mark != markMet || c.Bounded.Mark != markMet || c.Bolt.Ratio < 1.039 || c.Bolt.Ratio > 1.041 {
		t.Errorf("3k CPU cell %+v %+v", c.Bolt, c.Bounded)
	}
	if c := cpu.Cells[1]; c.Bolt.Mark != markMissed || c.Bounded.Mark != markMissed {
		t.Errorf("30k CPU marks %s, %s; want both missed", c.Bolt.Mark, c.Bounded.Mark)
	}
	if c := row("CPU µs per event", "zipf:1.1").Cells; c[0].Bolt.Ratio < 0.899 || c[0].Bolt.Ratio > 0.901 || c[1].ClientGo != nil || c[1].Bolt != nil || c[1].Bounded != nil {
		t.Errorf("zipf CPU cells %+v, %+v", c[0].Bolt, c[1])
	}
	// The cold start is over client-go's watch-list start (2 s): 2.08 s at
	// 3k is missed; over its LIST start (4 s) it is not marked.
	if c := row("cold start synced s", "uniform").Cells[0]; *c.ClientGo != 2 || c.Bolt.Mark != markMissed || c.Bounded.Mark != markMet {
		t.Errorf("3k cold start: client-go %v, %+v %+v", *c.ClientGo, c.Bolt, c.Bounded)
	}
	if c := row("cold start synced s, over client-go LIST", "uniform").Cells[0]; *c.ClientGo != 4 || c.Bolt.Mark != "" || math.Abs(c.Bolt.Ratio-0.52) > 1e-9 {
		t.Errorf("3k cold start over LIST: client-go %v, %+v", *c.ClientGo, c.Bolt)
	}
	// Allocations: 1.2× at 30k is within 1.3×.
	if c := row("Go KiB allocated per event", "uniform").Cells[1]; *c.ClientGo != 2 || c.Bolt.Mark != markMet || c.Bounded.Mark != markMissed {
		t.Errorf("30k allocations per event: client-go %v, %+v %+v", *c.ClientGo, c.Bolt, c.Bounded)
	}
	if c := row("Go KiB allocated per object, cold start, over client-go LIST", "uniform").Cells[0]; *c.ClientGo != 20 || c.Bolt.Mark != "" || math.Abs(c.Bolt.Ratio-0.52) > 1e-9 {
		t.Errorf("3k allocations per object over LIST: client-go %v, %+v", *c.ClientGo, c.Bolt)
	}
	// Rows over boltinformer's own records have no client-go figure: the
	// figure itself is marked.
	if c := row("write_bytes per event over the record", "uniform").Cells[1]; c.ClientGo != nil || c.Bolt.Ratio != 0 || c.Bolt.Mark != markMet ||
		c.Bounded.Value < 1.02 || c.Bounded.Value > 1.03 || c.Bounded.Mark != markMet {
		t.Errorf("30k write over the record %+v %+v", c.Bolt, c.Bounded)
	}
	if c := row("cache file over records, churn's peak", "zipf:1.1").Cells[0]; c.ClientGo != nil || c.Bolt.Value != 2 || c.Bolt.Mark != "" {
		t.Errorf("3k zipf file peak %+v", c.Bolt)
	}
	// Reads of a few objects: only the bounded child is marked.
	if c := row("Get ns, 8 hot keys", "uniform").Cells[1]; c.Bolt.Mark != "" || c.Bounded.Mark != markMissed || c.Bounded.Ratio != 3 {
		t.Errorf("30k hot Get %+v %+v", c.Bolt, c.Bounded)
	}
	if c := row("RssAnon MiB peak, restart (bolt warm)", "uniform").Cells[1]; c.Bounded != nil || c.Bolt.Mark != markMissed {
		t.Errorf("30k restart without the bounded one: %+v %+v", c.Bolt, c.Bounded)
	}
	// Unmarked rows: write_bytes has no target.
	if c := row("write_bytes KiB per event", "uniform").Cells[0]; c.Bolt.Mark != "" || *c.ClientGo != 2 {
		t.Errorf("write_bytes cell %+v, client-go %v", c.Bolt, *c.ClientGo)
	}
	// Ten rows are marked for both children, two reads rows for bounded.
	// 3k uniform misses bolt's cold start alone, 3k zipf:1.1 nothing; 30k
	// meets only both children's write over the record and bolt's
	// allocations, the bounded restart rows unmeasured.
	if s.Met != 21+22+4 || s.Missed != 1+0+16 {
		t.Errorf("met %d, missed %d; want 47, 17", s.Met, s.Missed)
	}

	rows := steadyTable(s)
	if got := strings.Join(rows[0], "|"); got != "|churn|target|3k client-go|3k bolt/cg|3k bounded/cg|30k client-go|30k bolt/cg|30k bounded/cg" {
		t.Errorf("header %q", got)
	}
	want := map[string]string{
		"CPU µs per event|uniform":                      "CPU µs per event|uniform|≤1.1×|50|1.04 (52) [met]|0.50 (25) [met]|50|1.20 (60) [missed]|3.00 (150) [missed]",
		"CPU µs per event|zipf:1.1":                     "CPU µs per event|zipf:1.1|≤1.1×|50|0.90 (45) [met]|0.50 (25) [met]|-|-|-",
		"write_bytes per event over the record|uniform": "write_bytes per event over the record|uniform|≤2×|-|(0.35) [met]|(0.17) [met]|-|(0.41) [met]|(1.02) [met]",
	}
	for _, r := range rows[1:] {
		k := r[0] + "|" + r[1]
		if w, ok := want[k]; ok {
			if got := strings.Join(r, "|"); got != w {
				t.Errorf("row\n got %q\nwant %q", got, w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("no row %q", k)
	}
	var text strings.Builder
	if err := steadyReport(s).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Targets: 47 met, 17 missed.", "missed at 30k, uniform: CPU µs per event, boltinformer 1.20× (target ≤1.1×)",
		"missed at 30k, uniform: RssAnon MiB peak, churn, boltinformer-bounded 3.00× (target ≤1.1×)",
		"WARNING at 30k, uniform: boltinformer had not seen every change.", "zipf:1.1: 300 at 3k (5.50)",
		"  CPU µs per event ≤1.1× client-go's", "  write_bytes per event over the record ≤2×", "  Get ns, 8 hot keys ≤2× client-go's, bounded only"} {
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
