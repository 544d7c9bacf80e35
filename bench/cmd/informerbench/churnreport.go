package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// churnResult is everything one churn run produced; it is saved as
// churn.json in the results directory.
type churnResult struct {
	Date          string           `json:"date"`
	Machine       benchkit.Machine `json:"machine"`
	PodSize       string           `json:"podSize"`
	PodProtoBytes float64          `json:"podProtoBytes"` // mean, as the apiserver serves them
	// Pods is --pods; PodsAtStart the bench's Pods when the children
	// started: --pods, or more if an earlier churn left more (the churn
	// tops the count up, and deletes none).
	Pods            int     `json:"pods,omitempty"`
	PodsAtStart     int     `json:"podsAtStart"`
	DurationSeconds float64 `json:"durationSeconds"` // --duration
	SampleSeconds   float64 `json:"sampleSeconds"`
	Mix             string  `json:"mix"` // update,create,delete weights
	// Skew is the law by which updates picked their Pod (--skew); "" in
	// results from before it existed, which were uniform.
	Skew        string `json:"skew,omitempty"`
	ContentType string `json:"contentType"` // both informers'
	// BatchInterval is boltinformer's group commit interval (persist's
	// default).
	BatchInterval string          `json:"batchInterval"`
	Drive         churnDriveStats `json:"drive"`
	// 1-minute load average when the churn began and ended: the machine is
	// shared with the apiserver, etcd and the driver, maybe more.
	LoadAvgStart float64 `json:"loadAvgStart"`
	LoadAvgEnd   float64 `json:"loadAvgEnd"`
	// CPU seconds kube-apiserver and etcd used during the churn; -1 if
	// unknown.
	APIServerCPUs float64 `json:"apiserverCpuS"`
	EtcdCPUs      float64 `json:"etcdCpuS"`
	// StartSampleSeconds is the sampling interval of the
	// cold starts and the restarts; RestartSettleSeconds
	// how long a restart was sampled after it synced,
	// 0 if there were no restarts.
	StartSampleSeconds   float64 `json:"startSampleSeconds,omitempty"`
	RestartSettleSeconds float64 `json:"restartSettleSeconds,omitempty"`
	// Informers: client-go, then boltinformer, then (with --bounded)
	// boltinformer-bounded.
	Informers []churnInformer `json:"informers"`
	// ClientGoList is the cold start of client-go with its LIST (the
	// WatchListClient gate off), a child that did not churn; nil in
	// results from before it ran.
	ClientGoList *churnStart `json:"clientGoList,omitempty"`
	// CacheObjects is boltinformer-bounded's cache (--bounded), 0 without it.
	CacheObjects int `json:"cacheObjects,omitempty"`
	// Ratios: boltinformer over client-go during the churn (see
	// churnRatios); every informer's are in its own Ratios.
	Ratios  map[string]float64 `json:"ratios"`
	Samples []churnSample      `json:"samples"`
}

// churnInformer is one child's report and what the parent sampled of it.
type churnInformer struct {
	Informer string            `json:"informer"`
	Child    *churnChildResult `json:"child"`
	Summary  churnSummary      `json:"summary"`
	// Cold is its cold start (spawn to synced, with its file's flush);
	// Restart, if the run restarted the children, the restart's.
	Cold    churnStart  `json:"cold"`
	Restart *churnStart `json:"restart,omitempty"`
	// Ratios: this informer over client-go (nil for client-go).
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

// churnSample is one reading of one child's /proc counters in a phase of
// the run: during the churn (phaseChurn), T seconds after the churn began
// (the first, at 0, is taken once every child is synced; the last after
// each has seen every change); during a cold start or a restart
// (phaseCold, phaseRestart), T seconds after the child was started.
type churnSample struct {
	T        float64 `json:"t"`
	Informer string  `json:"informer"`
	Phase    string  `json:"phase,omitempty"` // "" in results from before phases: the churn
	// FileBytes is a boltinformer child's cache file size (0 for client-go).
	FileBytes int64 `json:"fileBytes,omitempty"`
	benchkit.ProcSample
}

// churnStart is what the parent saw of one child's start: a cold start
// before the churn, or a restart after it.
type churnStart struct {
	// SyncSeconds: the child's construction to its handler's HasSynced;
	// ReadySeconds: its spawn to its READY line (for a cold start, after
	// the file was flushed).
	SyncSeconds  float64 `json:"syncSeconds"`
	ReadySeconds float64 `json:"readySeconds"`
	// RssAnonPeak: the highest sample from spawn to READY (and, for a
	// restart, to the end of the settle); RssAnonEnd: the last sample (a
	// restart's, restartSettle after READY).
	RssAnonPeak uint64 `json:"rssAnonPeak"`
	RssAnonEnd  uint64 `json:"rssAnonEnd"`
	// InitialAdds the handler got.
	InitialAdds int64 `json:"initialAdds"`
	// AllocBytes: Go heap bytes the child allocated in the start
	// (churnChildResult.StartAllocBytes).
	AllocBytes uint64 `json:"allocBytes,omitempty"`
}

// allocPerObject is the start's Go heap bytes allocated per initial add, 0
// if either was not measured.
func (st *churnStart) allocPerObject() float64 {
	if st.InitialAdds <= 0 {
		return 0
	}
	return float64(st.AllocBytes) / float64(st.InitialAdds)
}

// startOf summarizes a start phase of informer from its samples (T from
// spawn) and the time its READY line came.
func startOf(samples []churnSample, informer, phase string, ready float64, child *churnChildResult) churnStart {
	st := churnStart{ReadySeconds: ready}
	for _, x := range samples {
		if x.Informer != informer || x.Phase != phase {
			continue
		}
		st.RssAnonPeak = max(st.RssAnonPeak, x.RssAnon)
		st.RssAnonEnd = x.RssAnon
	}
	if child != nil {
		st.SyncSeconds, st.InitialAdds, st.AllocBytes = child.SyncSeconds, child.InitialAdds, child.StartAllocBytes
	}
	return st
}

// churnSummary is a child's cost over the churn: differences of its first
// and last samples, per event handled.
type churnSummary struct {
	CPUSeconds         float64 `json:"cpuSeconds"`
	CPUMicrosPerEvent  float64 `json:"cpuMicrosPerEvent"`
	WcharBytes         uint64  `json:"wcharBytes"`
	WriteBytes         uint64  `json:"writeBytes"`
	WcharPerEvent      float64 `json:"wcharPerEvent"`
	WriteBytesPerEvent float64 `json:"writeBytesPerEvent"`
	RssAnonStart       uint64  `json:"rssAnonStart"`
	RssAnonEnd         uint64  `json:"rssAnonEnd"`
	RssAnonMax         uint64  `json:"rssAnonMax"` // of the samples
	// FileBytesMax: the largest cache file size sampled (boltinformer).
	FileBytesMax int64 `json:"fileBytesMax,omitempty"`
	Events       int64 `json:"events"`
}

// allocPerEvent is the Go heap bytes c allocated in the churn per event it
// handled, 0 if either was not measured.
func (c *churnChildResult) allocPerEvent() float64 {
	if c.Events <= 0 {
		return 0
	}
	return float64(c.ChurnAllocBytes) / float64(c.Events)
}

// recordBytes is the mean size of a record in c's file after the churn, 0
// if it was not measured.
func (c *churnChildResult) recordBytes() float64 {
	if c.File == nil || c.File.Objects <= 0 {
		return 0
	}
	return float64(c.File.RecordBytes) / float64(c.File.Objects)
}

// fileOverRecords is in's cache file size over its records' bytes after
// the churn, at the end and at the largest size sampled; false if not
// measured (client-go, or no records).
func (in churnInformer) fileOverRecords() (end, peak float64, ok bool) {
	c := in.Child
	if c == nil || c.File == nil || c.File.RecordBytes <= 0 || c.FileBytesEnd <= 0 {
		return 0, 0, false
	}
	records := float64(c.File.RecordBytes)
	return float64(c.FileBytesEnd) / records, float64(max(c.FileBytesEnd, in.Summary.FileBytesMax)) / records, true
}

// writePerEventOverRecord is in's bytes written to disk per event over
// its mean record; false if not measured.
func (in churnInformer) writePerEventOverRecord() (float64, bool) {
	rec := in.Child.recordBytes()
	if rec <= 0 || in.Summary.Events <= 0 {
		return 0, false
	}
	return in.Summary.WriteBytesPerEvent / rec, true
}

// summarize computes informer's summary from samples (in time order) and
// the events its child handled. Without samples it is zero.
func summarize(samples []churnSample, informer string, events int64) churnSummary {
	var first, last *churnSample
	var s churnSummary
	for i := range samples {
		x := &samples[i]
		if x.Informer != informer || (x.Phase != phaseChurn && x.Phase != "") {
			continue
		}
		if first == nil {
			first = x
		}
		last = x
		s.RssAnonMax = max(s.RssAnonMax, x.RssAnon)
		s.FileBytesMax = max(s.FileBytesMax, x.FileBytes)
	}
	if first == nil {
		return churnSummary{}
	}
	s.Events = events
	s.CPUSeconds = last.CPUSeconds - first.CPUSeconds
	s.WcharBytes, s.WriteBytes = last.Wchar-first.Wchar, last.WriteBytes-first.WriteBytes
	s.RssAnonStart, s.RssAnonEnd = first.RssAnon, last.RssAnon
	if events > 0 {
		n := float64(events)
		s.CPUMicrosPerEvent = s.CPUSeconds * 1e6 / n
		s.WcharPerEvent, s.WriteBytesPerEvent = float64(s.WcharBytes)/n, float64(s.WriteBytes)/n
	}
	return s
}

// Ratio names in churnResult.Ratios and churnInformer.Ratios.
const (
	rCPU        = "cpuSeconds"
	rCPUPerEvt  = "cpuPerEvent"
	rLatencyP99 = "latencyP99"
	rRssAnonMax = "rssAnonMax"
	// Peak private memory of the cold start and of the restart, and the
	// restart's at the end of its settle.
	rColdPeak       = "coldRssAnonPeak"
	rRestartPeak    = "restartRssAnonPeak"
	rRestartSettled = "restartRssAnonEnd"
	// Private memory at the churn's first sample: after sync, with the
	// start's garbage returned.
	rRssAnonStart = "rssAnonStart"
	// Go heap bytes allocated per event in the churn, and per object in
	// the cold start (over client-go's, and over client-go's LIST start).
	rAllocPerEvt       = "allocPerEvent"
	rColdAlloc         = "coldAllocPerObject"
	rColdAllocOverList = "coldAllocPerObjectOverList"
	// The cold start's sync time over client-go's, and its sync time and
	// peak private memory over client-go's with its LIST.
	rColdSync         = "coldSynced"
	rColdSyncOverList = "coldSyncedOverList"
	rColdPeakOverList = "coldRssAnonPeakOverList"
	// The read prices (readPrices), per op.
	rHotGet    = "hotGet"
	rRandomGet = "randomGet"
	rByIndex   = "byIndex"
	rByName    = "byName"
	rList      = "list"
)

// churnRatios is a boltinformer child over client-go for CPU (total and
// per event), p99 latency and private memory during the churn, the
// starts' sync time and peak private memory, and the read prices; the cold
// start is compared with client-go with its LIST (list) too, if it ran. A
// ratio whose client-go figure is 0 is left out.
func churnRatios(cg, bolt churnInformer, list *churnStart) map[string]float64 {
	out := map[string]float64{}
	put := func(k string, b, c float64) {
		if c > 0 {
			out[k] = b / c
		}
	}
	put(rCPU, bolt.Summary.CPUSeconds, cg.Summary.CPUSeconds)
	put(rCPUPerEvt, bolt.Summary.CPUMicrosPerEvent, cg.Summary.CPUMicrosPerEvent)
	put(rLatencyP99, bolt.Child.LatencyP99Ms, cg.Child.LatencyP99Ms)
	put(rRssAnonMax, float64(bolt.Summary.RssAnonMax), float64(cg.Summary.RssAnonMax))
	put(rRssAnonStart, float64(bolt.Summary.RssAnonStart), float64(cg.Summary.RssAnonStart))
	put(rColdPeak, float64(bolt.Cold.RssAnonPeak), float64(cg.Cold.RssAnonPeak))
	put(rColdSync, bolt.Cold.SyncSeconds, cg.Cold.SyncSeconds)
	if b := bolt.Child.allocPerEvent(); b > 0 {
		put(rAllocPerEvt, b, cg.Child.allocPerEvent())
	}
	if b := bolt.Cold.allocPerObject(); b > 0 {
		put(rColdAlloc, b, cg.Cold.allocPerObject())
	}
	if list != nil {
		put(rColdSyncOverList, bolt.Cold.SyncSeconds, list.SyncSeconds)
		put(rColdPeakOverList, float64(bolt.Cold.RssAnonPeak), float64(list.RssAnonPeak))
		if b := bolt.Cold.allocPerObject(); b > 0 {
			put(rColdAllocOverList, b, list.allocPerObject())
		}
	}
	if b, c := bolt.Child.Reads, cg.Child.Reads; b != nil && c != nil {
		put(rHotGet, b.HotGetNs, c.HotGetNs)
		put(rRandomGet, b.RandomGetNs, c.RandomGetNs)
		put(rByIndex, b.ByIndexNs, c.ByIndexNs)
		put(rByName, b.ByNameNs, c.ByNameNs)
		put(rList, b.ListMs, c.ListMs)
	}
	if bolt.Restart != nil && cg.Restart != nil {
		put(rRestartPeak, float64(bolt.Restart.RssAnonPeak), float64(cg.Restart.RssAnonPeak))
		put(rRestartSettled, float64(bolt.Restart.RssAnonEnd), float64(cg.Restart.RssAnonEnd))
	}
	return out
}

// churnTable is the report's table: a header, then one row per figure with
// a column per informer (client-go first) and, for each other informer,
// its ratio to client-go where there is one.
func churnTable(r *churnResult) [][]string {
	head := []string{""}
	for _, in := range r.Informers {
		head = append(head, in.Informer)
	}
	for _, in := range r.Informers[1:] {
		head = append(head, in.Informer+" / client-go")
	}
	rows := [][]string{head}
	row := func(name, ratioKey string, cell func(in churnInformer) string) {
		cells := []string{name}
		for _, in := range r.Informers {
			cells = append(cells, cell(in))
		}
		for _, in := range r.Informers[1:] {
			if v, ok := in.Ratios[ratioKey]; ok {
				cells = append(cells, fmt.Sprintf("%.2f", v))
			} else {
				cells = append(cells, "")
			}
		}
		rows = append(rows, cells)
	}
	kib := func(x float64) string { return fmt.Sprintf("%.1f", x/1024) }
	row("synced before the churn in", rColdSync, func(in churnInformer) string { return seconds(in.Child.SyncSeconds).String() })
	row("RssAnon MiB peak, cold start", rColdPeak, func(in churnInformer) string { return f0(mib(in.Cold.RssAnonPeak)) })
	row("Go KiB allocated per object, cold start", rColdAlloc, func(in churnInformer) string { return measured(in.Cold.allocPerObject()/1024, f1) })
	if l := r.ClientGoList; l != nil {
		// client-go's column holds its LIST start; the ratios are over it.
		onlyClientGo := func(v string) func(in churnInformer) string {
			return func(in churnInformer) string {
				if in.Informer == informerClientGo {
					return v
				}
				return ""
			}
		}
		row("client-go with LIST: cold start synced in", rColdSyncOverList, onlyClientGo(seconds(l.SyncSeconds).String()))
		row("client-go with LIST: RssAnon MiB peak, cold start", rColdPeakOverList, onlyClientGo(f0(mib(l.RssAnonPeak))))
		row("client-go with LIST: Go KiB allocated per object, cold start", rColdAllocOverList, onlyClientGo(measured(l.allocPerObject()/1024, f1)))
	}
	row("events handled (add/update/delete)", "", func(in churnInformer) string {
		c := in.Child
		s := fmt.Sprintf("%d (%d/%d/%d)", c.Events, c.Adds, c.Updates, c.Deletes)
		if !c.Drained {
			s += " INCOMPLETE"
		}
		return s
	})
	row("CPU-s during churn", rCPU, func(in churnInformer) string { return f2(in.Summary.CPUSeconds) })
	row("CPU µs per event", rCPUPerEvt, func(in churnInformer) string { return f0(in.Summary.CPUMicrosPerEvent) })
	row("Go KiB allocated per event", rAllocPerEvt, func(in churnInformer) string { return measured(in.Child.allocPerEvent()/1024, f1) })
	row("wchar MiB (KiB per event)", "", func(in churnInformer) string {
		return fmt.Sprintf("%s (%s)", f1(mib(in.Summary.WcharBytes)), kib(in.Summary.WcharPerEvent))
	})
	row("write_bytes MiB (KiB per event)", "", func(in churnInformer) string {
		return fmt.Sprintf("%s (%s)", f1(mib(in.Summary.WriteBytes)), kib(in.Summary.WriteBytesPerEvent))
	})
	row("write_bytes per event over the record", "", func(in churnInformer) string {
		v, _ := in.writePerEventOverRecord()
		return measured(v, f2)
	})
	row("RssAnon MiB start / end", "", func(in churnInformer) string {
		return fmt.Sprintf("%s / %s", f0(mib(in.Summary.RssAnonStart)), f0(mib(in.Summary.RssAnonEnd)))
	})
	row("RssAnon MiB peak, churn", rRssAnonMax, func(in churnInformer) string { return f0(mib(in.Summary.RssAnonMax)) })
	row("latency p50 ms", "", func(in churnInformer) string { return f1(in.Child.LatencyP50Ms) })
	row("latency p99 ms", rLatencyP99, func(in churnInformer) string { return f1(in.Child.LatencyP99Ms) })
	row("latency max ms", "", func(in churnInformer) string { return f1(in.Child.LatencyMaxMs) })
	row("events timed (untimed)", "", func(in churnInformer) string {
		return fmt.Sprintf("%d (%d)", in.Child.Timed, in.Child.Untimed)
	})
	row("cache file MiB start → end", "", func(in churnInformer) string {
		if in.Child.FileBytesEnd == 0 {
			return "-"
		}
		return fmt.Sprintf("%s → %s", f1(mib(in.Child.FileBytesStart)), f1(mib(in.Child.FileBytesEnd)))
	})
	row("records MiB (objects) at the end", "", func(in churnInformer) string {
		if in.Child.File == nil {
			return "-"
		}
		return fmt.Sprintf("%s (%d)", f1(mib(in.Child.File.RecordBytes)), in.Child.File.Objects)
	})
	row("cache file over records, end · peak", "", func(in churnInformer) string {
		end, peak, ok := in.fileOverRecords()
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%s · %s", f2(end), f2(peak))
	})
	if slices.ContainsFunc(r.Informers, func(in churnInformer) bool { return in.Child.Reads != nil }) {
		reads := func(cell func(p *readPrices) string) func(in churnInformer) string {
			return func(in churnInformer) string {
				if in.Child.Reads == nil {
					return "-"
				}
				return cell(in.Child.Reads)
			}
		}
		row(fmt.Sprintf("Get ns, %d hot keys", hotReads), rHotGet, reads(func(p *readPrices) string { return f0(p.HotGetNs) }))
		row("Get ns, random keys", rRandomGet, reads(func(p *readPrices) string { return f0(p.RandomGetNs) }))
		row(fmt.Sprintf("ByIndex %s ns, %d hot nodes (objects per call)", nodeNameIndex, hotReads), rByIndex, reads(func(p *readPrices) string {
			return fmt.Sprintf("%s (%s)", f0(p.ByIndexNs), f1(p.ByIndexObjects))
		}))
		row(fmt.Sprintf("ByIndex %s ns, %d hot names (one object)", podNameIndex, hotReads), rByName, reads(func(p *readPrices) string { return f0(p.ByNameNs) }))
		row("List of every Pod ms", rList, reads(func(p *readPrices) string { return f2(p.ListMs) }))
		row("decoded-cache hits %, hot Get/random Get/ByIndex node/by name/List", "", reads(func(p *readPrices) string {
			if p.CacheHits == nil {
				return "-"
			}
			shares := make([]string, 0, 5)
			for _, k := range []string{rHotGet, rRandomGet, rByIndex, rByName, rList} {
				if v, ok := p.CacheHits[k]; ok {
					shares = append(shares, f0(100*v))
				} else {
					shares = append(shares, "-")
				}
			}
			if p.CachedObjects < 0 {
				return strings.Join(shares, "/")
			}
			return fmt.Sprintf("%s (%d)", strings.Join(shares, "/"), p.CachedObjects)
		}))
	}
	if r.RestartSettleSeconds > 0 {
		restart := func(cell func(st *churnStart) string) func(in churnInformer) string {
			return func(in churnInformer) string {
				if in.Restart == nil {
					return "-"
				}
				return cell(in.Restart)
			}
		}
		row("restart: synced in", "", restart(func(st *churnStart) string { return seconds(st.SyncSeconds).String() }))
		row("RssAnon MiB peak, restart", rRestartPeak, restart(func(st *churnStart) string { return f0(mib(st.RssAnonPeak)) }))
		row(fmt.Sprintf("RssAnon MiB %v after the restart synced", seconds(r.RestartSettleSeconds)), rRestartSettled,
			restart(func(st *churnStart) string { return f0(mib(st.RssAnonEnd)) }))
	}
	return rows
}

// churnReport is what the churn did, the table and the plots.
func churnReport(r *churnResult) *benchkit.Report {
	w := &benchkit.Report{Plots: churnPlots(r)}
	d := r.Drive
	names := make([]string, len(r.Informers))
	for i, in := range r.Informers {
		names[i] = in.Informer
	}
	w.Printf("\n%d %s Pods (%.1f KB of protobuf each); %s in %s, side by side in their own processes; boltinformer's group commit every %s.\n",
		r.PodsAtStart, r.PodSize, r.PodProtoBytes/1000, strings.Join(names, ", "), r.ContentType, r.BatchInterval)
	w.Printf("Churn: %d changes in %v, %.1f/s achieved of %.0f/s (mix update,create,delete %s; ok %d/%d/%d, failed %d/%d/%d,\n"+
		"skipped %d, dropped %.0f, %d ticks at the bound of %d requests in flight); request latency p50 %.1f ms, p99 %.1f ms.\n",
		d.Succeeded, seconds(d.Seconds), d.AchievedPerSec, d.TargetPerSec, r.Mix,
		d.OK["update"], d.OK["create"], d.OK["delete"], d.Failed["update"], d.Failed["create"], d.Failed["delete"],
		d.Skipped, d.Dropped, d.BoundTicks, d.MaxInFlight, d.RequestP50Ms, d.RequestP99Ms)
	w.Printf("Updates picked %s: %d distinct Pods updated; %.2f updates per Pod updated within %s.\n",
		cmp.Or(r.Skew, "uniform"), d.DistinctUpdated, d.UpdatesPerPodPerWindow, skewWindows(d))
	for _, e := range d.Errors {
		w.Printf("  error: %s\n", e)
	}
	load := fmt.Sprintf("load average %s → %s", f1(r.LoadAvgStart), f1(r.LoadAvgEnd))
	if r.APIServerCPUs >= 0 && r.EtcdCPUs >= 0 {
		load += fmt.Sprintf("; kube-apiserver used %.1f CPU-s, etcd %.1f", r.APIServerCPUs, r.EtcdCPUs)
	}
	w.Printf("Sampled every %v from every child synced to every change seen (%s).\n", seconds(r.SampleSeconds), load)
	starts := fmt.Sprintf("Cold starts one child at a time, before the churn, sampled every %v from spawn to synced", seconds(r.StartSampleSeconds))
	if r.RestartSettleSeconds > 0 {
		starts += fmt.Sprintf("; restarts after it (client-go cold, boltinformer warm on its file), one at a time, from spawn to %v after synced, the start's garbage not returned", seconds(r.RestartSettleSeconds))
	}
	if r.ClientGoList != nil {
		starts += "; client-go with its LIST (the WatchListClient gate off) started cold too, then closed"
	}
	w.Printf("%s.\n\n", starts)
	rows := churnTable(r)
	t := w.Table(rows[0]...)
	for _, cells := range rows[1:] {
		t.Row(cells...)
	}
	w.Printf("%s\n", "A delete is two events (deletionTimestamp set, then removed). wchar: bytes handed to write syscalls (sockets and logs\n"+
		"too); write_bytes: bytes sent to the block layer. Latency: handler call minus the writer's clock just before the request,\n"+
		"for each create's add and each patch's update. Allocated: the child's Go heap allocations (/gc/heap/allocs:bytes), from\n"+
		"construction to synced (boltinformer: and flushed) per initial add, and from the churn's start to every change seen (and\n"+
		"flushed) per event. Records: the file's records as persist counts them after the churn; the peak file is the largest sampled.")
	if slices.ContainsFunc(r.Informers, func(in churnInformer) bool { return in.Child.Reads != nil }) {
		w.Printf("Reads: timed in each child through its lister and indexer after the churn's last sample, one child at a time,\n"+
			"each about %v after a warm-up; random keys are drawn uniformly over every Pod.\n", readBudget)
	}
	return w
}

// skewWindows says what the updates per Pod were measured over.
func skewWindows(d churnDriveStats) string {
	switch d.SkewWindows {
	case 0:
		return fmt.Sprintf("the run's %d changes (fewer than a window of %d)", d.Succeeded, d.SkewWindow)
	case 1:
		return fmt.Sprintf("one window of %d changes", d.SkewWindow)
	}
	return fmt.Sprintf("windows of %d changes (%d windows)", d.SkewWindow, d.SkewWindows)
}

// measured formats v, or "-" for a figure not measured (0 or less).
func measured(v float64, format func(float64) string) string {
	if v <= 0 {
		return "-"
	}
	return format(v)
}
