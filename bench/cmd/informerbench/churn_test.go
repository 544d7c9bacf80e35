package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

func TestChurnMixKeepsExactShares(t *testing.T) {
	m := churnMix
	var done [numOps]int
	for n := 1; n <= 1000; n++ {
		done[m.next(done)]++
		for k := range numOps {
			// Each kind stays within one of its exact share after every change.
			exact := float64(m[k]*n) / float64(m.total())
			if d := float64(done[k]) - exact; d > 1 || d < -1 {
				t.Fatalf("after %d changes %s count %d, exact share %.1f", n, opNames[k], done[k], exact)
			}
		}
		if n%10 == 0 && (done[opUpdate] != 8*n/10 || done[opCreate] != n/10 || done[opDelete] != n/10) {
			t.Fatalf("after %d changes counts %v, want 8:1:1 in every 10", n, done)
		}
	}
	zero := opMix{1, 0, 1}
	done = [numOps]int{}
	for range 100 {
		done[zero.next(done)]++
	}
	if done != [numOps]int{50, 0, 50} {
		t.Errorf("mix 1,0,1: counts %v, want [50 0 50]", done)
	}
}

func TestTokenBucketPaces(t *testing.T) {
	b := tokenBucket{rate: 100, burst: 100}
	taken := 0
	for range 1000 { // 10 s in 10 ms ticks
		if d := b.add(10 * time.Millisecond); d != 0 {
			t.Fatalf("dropped %v tokens while keeping up", d)
		}
		for b.take() {
			taken++
		}
	}
	if taken < 999 || taken > 1000 { // float rounding may leave the last token at 0.99…
		t.Errorf("took %d tokens in 10 s at 100/s", taken)
	}
	// Five seconds with every slot busy: one second's worth is kept.
	b = tokenBucket{rate: 100, burst: 100}
	if d := b.add(5 * time.Second); d != 400 || b.tokens != 100 {
		t.Errorf("after a 5 s stall: dropped %v, tokens %v; want 400 and 100", d, b.tokens)
	}
}

func TestPodPoolNeverHandsOutABusyPod(t *testing.T) {
	p := newPodPool([]podRef{{"a", "1"}, {"a", "2"}}, 1, churnSkew{})
	r1, ok1 := p.checkout(false)
	r2, ok2 := p.checkout(true)
	if !ok1 || !ok2 || r1 == r2 {
		t.Fatalf("checkouts %v %v, %v %v: want both Pods", r1, ok1, r2, ok2)
	}
	if r, ok := p.checkout(false); ok {
		t.Errorf("checked out busy Pod %v", r)
	}
	if p.len() != 1 {
		t.Errorf("pool holds %d Pods after a removing checkout, want 1", p.len())
	}
	p.release(r1)
	if r, ok := p.checkout(false); !ok || r != r1 {
		t.Errorf("after release: %v %v, want %v", r, ok, r1)
	}
}

func TestChurnHandlerTimesOnlyThisRunsChanges(t *testing.T) {
	since := time.Now().Add(-time.Second).UnixNano()
	h := newChurnHandler(since, 0)
	pod := func(sent int64) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if sent != 0 {
			p.Annotations[sentAnnot] = strconv.FormatInt(sent, 10)
		}
		return p
	}
	created := time.Now().Add(-5 * time.Millisecond).UnixNano()
	patched := time.Now().Add(-20 * time.Millisecond).UnixNano()
	h.OnAdd(pod(since+1), true) // initial: counted apart, never timed
	h.OnAdd(pod(created), false)
	h.OnUpdate(pod(created), pod(patched))
	h.OnUpdate(pod(0), pod(since-1)) // an earlier run's
	h.OnUpdate(pod(0), pod(0))       // none
	// A delete: the deletionTimestamp update keeps the annotation, then
	// the delete.
	h.OnUpdate(pod(patched), pod(patched))
	h.OnDelete(pod(patched))
	if want := [numOps]int64{opCreate: 1, opUpdate: 1, opDelete: 1}; !h.seen(want) {
		t.Errorf("not seen %v", want)
	}
	if h.seen([numOps]int64{opUpdate: 2}) {
		t.Error("the delete's update counted as a patch")
	}
	var res churnChildResult
	h.fill(&res)
	if h.initialAdds.Load() != 1 || res.Adds != 1 || res.Updates != 4 || res.Deletes != 1 || res.Events != 6 {
		t.Errorf("counts initial %d, %+v", h.initialAdds.Load(), res)
	}
	if res.Timed != 2 || res.Untimed != 3 {
		t.Errorf("timed %d, untimed %d; want 2, 3", res.Timed, res.Untimed)
	}
	if res.LatencyMaxMs < 20 || res.LatencyMaxMs > 1000 || res.LatencyP50Ms < 5 {
		t.Errorf("latencies p50 %v, max %v ms; want about 5 and 20", res.LatencyP50Ms, res.LatencyMaxMs)
	}
}

func TestChurnSummaryRatiosAndTable(t *testing.T) {
	const mb = 1 << 20
	samples := []churnSample{
		{T: 0, Informer: informerClientGo, ProcSample: benchkit.ProcSample{CPUSeconds: 10, Wchar: 1000, WriteBytes: 0, RssAnon: 400 * mb}},
		{T: 0, Informer: informerBolt, FileBytes: 10 * mb, ProcSample: benchkit.ProcSample{CPUSeconds: 30, Wchar: 5000, WriteBytes: 4096, RssAnon: 200 * mb}},
		{T: 5, Informer: informerClientGo, ProcSample: benchkit.ProcSample{CPUSeconds: 11, Wchar: 1100, WriteBytes: 0, RssAnon: 450 * mb}},
		{T: 5, Informer: informerBolt, FileBytes: 14 * mb, ProcSample: benchkit.ProcSample{CPUSeconds: 32, Wchar: 100 * mb, WriteBytes: 40 * mb, RssAnon: 260 * mb}},
		{T: 10, Informer: informerClientGo, ProcSample: benchkit.ProcSample{CPUSeconds: 12, Wchar: 1200, WriteBytes: 0, RssAnon: 420 * mb}},
		{T: 10, Informer: informerBolt, FileBytes: 12 * mb, ProcSample: benchkit.ProcSample{CPUSeconds: 33, Wchar: 200*mb + 5000, WriteBytes: 80*mb + 4096, RssAnon: 210 * mb}},
	}
	// client-go allocates 2,000 bytes an event, boltinformer 2,600; its
	// records are 8 KiB each on average.
	cg := churnInformer{Informer: informerClientGo, Child: &churnChildResult{Events: 1000, Adds: 100, Updates: 800, Deletes: 100, Drained: true, LatencyP99Ms: 4,
		ChurnAllocBytes: 1000 * 2000}, Summary: summarize(samples, informerClientGo, 1000)}
	bolt := churnInformer{Informer: informerBolt, Child: &churnChildResult{Events: 1000, Drained: true, LatencyP99Ms: 6, FileBytesStart: 10 * mb, FileBytesEnd: 12 * mb,
		ChurnAllocBytes: 1000 * 2600, File: &churnFile{Bytes: 12 * mb, RecordBytes: 8 * mb, Objects: 1024}},
		Summary: summarize(samples, informerBolt, 1000)}
	want := churnSummary{CPUSeconds: 3, CPUMicrosPerEvent: 3000, WcharBytes: 200 * mb, WriteBytes: 80 * mb,
		WcharPerEvent: 200 * mb / 1000.0, WriteBytesPerEvent: 80 * mb / 1000.0,
		RssAnonStart: 200 * mb, RssAnonEnd: 210 * mb, RssAnonMax: 260 * mb, FileBytesMax: 14 * mb, Events: 1000}
	if bolt.Summary != want {
		t.Errorf("summary\n got %+v\nwant %+v", bolt.Summary, want)
	}
	if cg.Summary.CPUSeconds != 2 || cg.Summary.WriteBytes != 0 || cg.Summary.WcharBytes != 200 || cg.Summary.RssAnonMax != 450*mb {
		t.Errorf("client-go summary %+v", cg.Summary)
	}
	// The starts: sampled from spawn, before and after the churn (whose
	// samples they must not change).
	starts := []churnSample{
		{T: 0, Informer: informerClientGo, Phase: phaseCold, ProcSample: benchkit.ProcSample{RssAnon: 10 * mb}},
		{T: 1, Informer: informerClientGo, Phase: phaseCold, ProcSample: benchkit.ProcSample{RssAnon: 900 * mb}},
		{T: 2, Informer: informerClientGo, Phase: phaseCold, ProcSample: benchkit.ProcSample{RssAnon: 500 * mb}},
		{T: 0, Informer: informerBolt, Phase: phaseCold, ProcSample: benchkit.ProcSample{RssAnon: 10 * mb}},
		{T: 1, Informer: informerBolt, Phase: phaseCold, ProcSample: benchkit.ProcSample{RssAnon: 450 * mb}},
		{T: 0, Informer: informerClientGo, Phase: phaseRestart, ProcSample: benchkit.ProcSample{RssAnon: 800 * mb}},
		{T: 1, Informer: informerClientGo, Phase: phaseRestart, ProcSample: benchkit.ProcSample{RssAnon: 600 * mb}},
		{T: 0, Informer: informerBolt, Phase: phaseRestart, ProcSample: benchkit.ProcSample{RssAnon: 100 * mb}},
		{T: 1, Informer: informerBolt, Phase: phaseRestart, ProcSample: benchkit.ProcSample{RssAnon: 60 * mb}},
	}
	if got := summarize(append(slices.Clone(starts), samples...), informerBolt, 1000); got != bolt.Summary {
		t.Errorf("start samples changed the churn's summary: %+v", got)
	}
	cg.Cold = startOf(starts, informerClientGo, phaseCold, 2.5, &churnChildResult{SyncSeconds: 2, InitialAdds: 7, StartAllocBytes: 7 * 10000})
	bolt.Cold = startOf(starts, informerBolt, phaseCold, 1.5, &churnChildResult{SyncSeconds: 1, InitialAdds: 7, StartAllocBytes: 7 * 12000})
	if want := (churnStart{SyncSeconds: 2, ReadySeconds: 2.5, RssAnonPeak: 900 * mb, RssAnonEnd: 500 * mb, InitialAdds: 7, AllocBytes: 7 * 10000}); cg.Cold != want {
		t.Errorf("cold start\n got %+v\nwant %+v", cg.Cold, want)
	}
	cgRestart := startOf(starts, informerClientGo, phaseRestart, 1, nil)
	boltRestart := startOf(starts, informerBolt, phaseRestart, 1, nil)
	cg.Restart, bolt.Restart = &cgRestart, &boltRestart
	bolt.Ratios = churnRatios(cg, bolt, nil)
	r := &churnResult{Informers: []churnInformer{cg, bolt}, Ratios: bolt.Ratios, RestartSettleSeconds: 15}
	for k, v := range map[string]float64{rCPU: 1.5, rCPUPerEvt: 1.5, rLatencyP99: 1.5, rRssAnonMax: 260.0 / 450,
		rColdPeak: 0.5, rRestartPeak: 100.0 / 800, rRestartSettled: 60.0 / 600, rAllocPerEvt: 1.3, rColdAlloc: 1.2} {
		if got := r.Ratios[k]; got < v-1e-9 || got > v+1e-9 {
			t.Errorf("ratio %s = %v, want %v", k, got, v)
		}
	}
	rows := churnTable(r)
	find := func(name string) []string {
		for _, row := range rows {
			if row[0] == name {
				return row
			}
		}
		t.Fatalf("no row %q in %v", name, rows)
		return nil
	}
	if got := strings.Join(find("CPU-s during churn"), "|"); got != "CPU-s during churn|2.00|3.00|1.50" {
		t.Errorf("CPU row %q", got)
	}
	if got := strings.Join(find("write_bytes MiB (KiB per event)"), "|"); got != "write_bytes MiB (KiB per event)|0.0 (0.0)|80.0 (81.9)|" {
		t.Errorf("write_bytes row %q", got)
	}
	if got := strings.Join(find("RssAnon MiB peak, churn"), "|"); got != "RssAnon MiB peak, churn|450|260|0.58" {
		t.Errorf("RssAnon row %q", got)
	}
	if got := strings.Join(find("RssAnon MiB peak, cold start"), "|"); got != "RssAnon MiB peak, cold start|900|450|0.50" {
		t.Errorf("cold start row %q", got)
	}
	if got := strings.Join(find("RssAnon MiB 15s after the restart synced"), "|"); got != "RssAnon MiB 15s after the restart synced|600|60|0.10" {
		t.Errorf("restart row %q", got)
	}
	if got := find("cache file MiB start → end"); got[1] != "-" || got[2] != "10.0 → 12.0" {
		t.Errorf("file row %q", got)
	}
	for name, want := range map[string]string{
		"Go KiB allocated per event":              "2.0|2.5|1.30",
		"Go KiB allocated per object, cold start": "9.8|11.7|1.20",
		"write_bytes per event over the record":   "-|10.24|",
		"records MiB (objects) at the end":        "-|8.0 (1024)|",
		"cache file over records, end · peak":     "-|1.50 · 1.75|",
	} {
		if got := strings.Join(find(name)[1:], "|"); got != want {
			t.Errorf("row %q: %q, want %q", name, got, want)
		}
	}
	// A client-go figure of 0 gives no ratio rather than +Inf.
	cg.Child.LatencyP99Ms = 0
	if _, ok := churnRatios(cg, bolt, nil)[rLatencyP99]; ok {
		t.Error("ratio over a zero client-go latency")
	}
}

func TestChurnRatiosOverListAndReads(t *testing.T) {
	const mb = 1 << 20
	cg := churnInformer{Informer: informerClientGo, Child: &churnChildResult{SyncSeconds: 2,
		Reads: &readPrices{HotGetNs: 100, RandomGetNs: 100, ByIndexNs: 1000, ByIndexObjects: 6, ListMs: 2}},
		Cold: churnStart{SyncSeconds: 2, RssAnonPeak: 300 * mb, AllocBytes: 100 * 4096, InitialAdds: 100}}
	bolt := churnInformer{Informer: informerBolt, Child: &churnChildResult{SyncSeconds: 1.5,
		Reads: &readPrices{HotGetNs: 150, RandomGetNs: 400, ByIndexNs: 1500, ByIndexObjects: 6, ListMs: 10,
			CacheHits: map[string]float64{rHotGet: 1, rRandomGet: 0.014, rList: 0}, CachedObjects: 10}},
		Cold: churnStart{SyncSeconds: 1.5, RssAnonPeak: 330 * mb, AllocBytes: 100 * 6144, InitialAdds: 100}}
	list := &churnStart{SyncSeconds: 3, RssAnonPeak: 600 * mb, AllocBytes: 100 * 12288, InitialAdds: 100}
	bolt.Ratios = churnRatios(cg, bolt, list)
	for k, v := range map[string]float64{rColdSync: 0.75, rColdSyncOverList: 0.5, rColdPeak: 1.1, rColdPeakOverList: 0.55,
		rHotGet: 1.5, rRandomGet: 4, rByIndex: 1.5, rList: 5, rColdAlloc: 1.5, rColdAllocOverList: 0.5} {
		if got := bolt.Ratios[k]; got < v-1e-9 || got > v+1e-9 {
			t.Errorf("ratio %s = %v, want %v", k, got, v)
		}
	}
	if r := churnRatios(cg, bolt, nil); r[rColdSyncOverList] != 0 || r[rHotGet] != 1.5 {
		t.Errorf("without a LIST start: %v", r)
	}
	r := &churnResult{Informers: []churnInformer{cg, bolt}, ClientGoList: list}
	rows := churnTable(r)
	want := map[string]string{
		"client-go with LIST: cold start synced in":                          "client-go with LIST: cold start synced in|3s||0.50",
		"client-go with LIST: RssAnon MiB peak, cold start":                  "client-go with LIST: RssAnon MiB peak, cold start|600||0.55",
		"client-go with LIST: Go KiB allocated per object, cold start":       "client-go with LIST: Go KiB allocated per object, cold start|12.0||0.50",
		"ByIndex nodeName ns, 8 hot nodes (objects per call)":                "ByIndex nodeName ns, 8 hot nodes (objects per call)|1000 (6.0)|1500 (6.0)|1.50",
		"List of every Pod ms":                                               "List of every Pod ms|2.00|10.00|5.00",
		"decoded-cache hits %, hot Get/random Get/ByIndex node/by name/List": "decoded-cache hits %, hot Get/random Get/ByIndex node/by name/List|-|100/1/-/-/0 (10)|",
	}
	for _, row := range rows {
		if w, ok := want[row[0]]; ok {
			if got := strings.Join(row, "|"); got != w {
				t.Errorf("row %q, want %q", got, w)
			}
			delete(want, row[0])
		}
	}
	for name := range want {
		t.Errorf("no row %q", name)
	}
}

func TestHeapAllocBytesCountsAllocations(t *testing.T) {
	before := heapAllocBytes()
	sink = make([]byte, 1<<20)
	if got := heapAllocBytes() - before; got < 1<<20 {
		t.Errorf("allocated %d bytes after a 1 MiB slice, want at least 1 MiB", got)
	}
}

// sink keeps TestHeapAllocBytesCountsAllocations' slice on the heap.
var sink []byte

func TestFileSize(t *testing.T) {
	dir := t.TempDir()
	if n, err := fileSize(filepath.Join(dir, "absent")); n != 0 || err != nil {
		t.Errorf("absent file: %d, %v; want 0, nil", n, err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := fileSize(path); n != 1234 || err != nil {
		t.Errorf("file: %d, %v; want 1234, nil", n, err)
	}
}

// TestMissingIndexesTopsUpToACount: a churn leaves about as many Pods as
// it found, not the same ones; the next churn at that size tops the count
// up, and does not bring the deleted Pods back beside the created ones.
func TestMissingIndexesTopsUpToACount(t *testing.T) {
	key := func(i int) string { return namespaceOf(i) + "/" + shapeRealistic.podName(i) }
	have := map[string]bool{}
	for _, i := range []int{1, 3, 10, 11, 12} { // 0, 2 and 4 deleted; 10–12 created
		have[key(i)] = true
	}
	if got := missingIndexes(have, 8, key); !slices.Equal(got, []int{0, 2, 4}) {
		t.Errorf("5 of 8 exist: create %v, want [0 2 4]", got)
	}
	if got := missingIndexes(have, 5, key); len(got) != 0 {
		t.Errorf("5 of 5 exist: create %v, want none", got)
	}
	if got := missingIndexes(have, 3, key); len(got) != 0 {
		t.Errorf("5 exist, 3 wanted: create %v, want none", got)
	}
	if got := missingIndexes(map[string]bool{}, 3, key); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("none exist: create %v, want [0 1 2]", got)
	}
}
