package main

import (
	"fmt"
	"strings"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// The recover subcommand's results: per point (an amount changed, or a
// downtime) the starts' medians and the headline ratios; saved as JSON, a
// text table, and for downtimes a plot.

const (
	modeChanged  = "changed"
	modeDowntime = "downtime"
)

// recoverResult is one recover run of one mode.
type recoverResult struct {
	runHeader
	Mode string `json:"mode"` // modeChanged or modeDowntime
	// Mix is recoverMix: weights of updated, deleted, recreated, created Pods.
	Mix string `json:"mix"`
	// Rate and WindowSeconds (downtime mode): Pod writes a second while
	// down, and the watch history beyond which the apiserver is restarted.
	Rate          float64         `json:"rate,omitempty"`
	WindowSeconds float64         `json:"windowSeconds,omitempty"`
	SettleSeconds float64         `json:"settleSeconds"`
	Points        []*recoverPoint `json:"points"`
}

// recoverPoint is one amount changed (or one downtime) and its starts.
type recoverPoint struct {
	Label string `json:"label"` // as given: "1%", "1000", "2m"
	// DowntimeSeconds and Writes (downtime mode): the downtime emulated,
	// and the Pod writes --rate makes in it.
	DowntimeSeconds float64 `json:"downtimeSeconds,omitempty"`
	Writes          int     `json:"writes,omitempty"`
	// Changes are made before each boltinformer start.
	Changes changeCounts `json:"changes"`
	// Expired: kube-apiserver was restarted before every start, so no
	// watch history reaches back to the stored resourceVersion.
	Expired  bool                          `json:"expired"`
	Runs     map[string][]*childResult     `json:"runs"`
	Medians  map[string]map[string]float64 `json:"medians"`
	Headline map[string]float64            `json:"headline"`
}

// Headline ratios of a point (headline).
const (
	// client-go's faster start: the lower median over its protobuf
	// watch-list and LIST modes, informer synced and every handler done.
	hBestSynced   = "client_go_faster_synced_s"
	hBestHandlers = "client_go_faster_handlers_s"
	// bolt-recover's informer synced and every handler done over
	// client-go's faster start.
	hRecoverSynced   = "recover_synced_x_client_go"
	hRecoverHandlers = "recover_handlers_x_client_go"
	// bolt-recover's bytes (as encoded, and on the wire) and apiserver CPU
	// over a full list's: client-go's protobuf LIST, or the fallback's.
	hRecoverBytes  = "recover_bytes_x_full_list"
	hRecoverWire   = "recover_wire_x_full_list"
	hRecoverAPICPU = "recover_apiserver_cpu_x_full_list"
	// bolt-recover-full's (the full-list fallback's) informer synced over
	// client-go's faster start; bolt-410's (no Recovery: a relist).
	hFallbackSynced = "fallback_synced_x_client_go"
	hRelistSynced   = "relist_synced_x_client_go"
)

// fullListVariant is the start whose transfer is a full list of the
// collection: client-go's protobuf LIST, or else the fallback's relist.
func fullListVariant(med map[string]map[string]float64) string {
	for _, v := range []string{vClientGoProtoList, vBolt410} {
		if _, ok := med[v][mBodyMiB]; ok {
			return v
		}
	}
	return ""
}

// headline computes a point's ratios from its medians; a ratio whose two
// sides were not both measured is absent.
func headline(med map[string]map[string]float64) map[string]float64 {
	out := map[string]float64{}
	put := func(name string, a float64, okA bool, b float64, okB bool) {
		if x, ok := ratioOf(a, b, okA, okB); ok {
			out[name] = x
		}
	}
	// client-go's faster start: the lower median of its two protobuf modes.
	synced, _, okS := bestClientGo(med, mInformerSynced)
	handlers, _, okH := bestClientGo(med, mSync)
	okS, okH = okS && synced > 0, okH && handlers > 0
	if okS {
		out[hBestSynced] = synced
	}
	if okH {
		out[hBestHandlers] = handlers
	}
	rec, fb := med[vBoltRecover], med[vBoltRecoverFull]
	x, ok := med[vBolt410][mInformerSynced]
	put(hRelistSynced, x, ok, synced, okS)
	x, ok = rec[mInformerSynced]
	put(hRecoverSynced, x, ok, synced, okS)
	x, ok = rec[mSync]
	put(hRecoverHandlers, x, ok, handlers, okH)
	x, ok = fb[mInformerSynced]
	put(hFallbackSynced, x, ok, synced, okS)
	if full := med[fullListVariant(med)]; full != nil {
		for _, r := range []struct{ name, metric string }{{hRecoverBytes, mBodyMiB}, {hRecoverWire, mWireMiB}, {hRecoverAPICPU, mAPICPU}} {
			a, okA := rec[r.metric]
			b, okB := full[r.metric]
			put(r.name, a, okA, b, okB)
		}
	}
	return out
}

// recoverTargets checks the recovery's targets at every point: in the
// changed mode (set at 1% changed of 100,000 Pods) synced ≤ 0.4×
// client-go's faster start, bytes ≤ 0.65× a full list, the fallback ≤
// 1.0× client-go; in the downtime mode, a restart never slower than
// client-go's cold start.
func recoverTargets(res *recoverResult) []target {
	var ts []target
	check := func(goal string, x float64, ok bool, limit float64, detail string) {
		ts = append(ts, checkTarget(goal, ok, x <= limit, detail, x))
	}
	for _, p := range res.Points {
		h := p.Headline
		get := func(name string) (float64, bool) { x, ok := h[name]; return x, ok }
		if res.Mode == modeDowntime {
			x, ok := get(hRecoverSynced)
			check(fmt.Sprintf("down %s: boltinformer synced ≤ 1.0× client-go's faster start", p.Label), x, ok, 1.0, "%.2f×")
			continue
		}
		at := fmt.Sprintf("%s changed (%d Pods)", p.Label, p.Changes.Total())
		x, ok := get(hRecoverSynced)
		check(at+": recovery synced ≤ 0.4× client-go's faster start", x, ok, 0.4, "%.2f×")
		x, ok = get(hRecoverBytes)
		check(at+": recovery's bytes (as encoded) ≤ 0.65× a full list", x, ok, 0.65, "%.2f×")
		x, ok = get(hFallbackSynced)
		check(at+": full-list fallback synced ≤ 1.0× client-go's faster start", x, ok, 1.0, "%.2f×")
		if float64(p.Changes.Total()) < 0.04*float64(res.Pods) {
			// Well below the first page's 5%: a full list is a wrong turn.
			x, ok = p.Medians[vBoltRecover][mStartLists]
			check(at+": the recovery makes no full LIST", x, ok, 0, "%.0f LISTs")
		}
	}
	return ts
}

// name is the results' file name without extension:
// recover-<mode>-<N>[-small].
func (r *recoverResult) name() string {
	return fmt.Sprintf("recover-%s-%s%s", r.Mode, benchkit.CountLabel(r.Pods), podShape(r.PodSize).label())
}

// report is the run's tables, targets and, for downtimes, the plot.
func (r *recoverResult) report() *benchkit.Report {
	w := &benchkit.Report{}
	shape := shapeRealistic
	if r.PodSize != "" {
		shape = podShape(r.PodSize)
	}
	w.Printf("\n=== restarts after a downtime (%s), %d %s Pods (%.1f KB of protobuf each), medians of %d — %s\n",
		r.Mode, r.Pods, shape, r.PodProtoBytes/1000, r.Reps, r.Date)
	w.Printf("    %s; idle kube-apiserver %.3f CPU-s/s, etcd %.3f\n", r.Machine, r.IdleAPIServerCPU, r.IdleEtcdCPU)
	r.printLoad(w)
	w.Printf("    Changed Pods are, by weight %s, label updates, deletes, deletes and re-creates under the same name (a new UID) and creates,\n"+
		"    made while no informer runs, before each boltinformer start only (its file is then exactly as old as the changes; a cold start\n"+
		"    lists whatever is there). \"Beyond the watch history\" is forced: kube-apiserver is restarted (etcd kept) before every start\n"+
		"    of such a point, boltinformer's and client-go's alike, so no history reaches back to a stored resourceVersion (the watch\n"+
		"    answers 410) and every start meets an apiserver that has just rebuilt its watch cache.\n", r.Mix)
	if r.Mode == modeDowntime {
		r.printDowntimes(w)
		w.Plots = []benchkit.Plot{r.downtimePlot()}
	} else {
		r.printChanged(w)
	}
	printTargets(w, r.Targets)
	return w
}

// recoverTitles are the report's names of the starts.
var recoverTitles = map[string]string{
	vBoltRecover:                    "boltinformer, recovering what changed",
	vBoltRecoverFull:                "boltinformer, recovering from a full list (fallback)",
	"bolt-recover-no-page-ahead":    "… without the page asked ahead",
	"bolt-recover-no-first-page":    "… without the first page's decision",
	"bolt-recover-decoded-metadata": "… with metadata pages decoded",
	"bolt-recover-decoded-lists":    "… with full lists decoded",
	vBolt410:                        "boltinformer without Recovery (relist)",
	vClientGoProto:                  "client-go protobuf, watch-list (default)",
	vClientGoProtoList:              "client-go protobuf, LIST",
}

// printChanged prints one table per amount changed, then the headline
// ratios side by side.
func (r *recoverResult) printChanged(w *benchkit.Report) {
	for _, p := range r.Points {
		w.Printf("\n%s changed: %d of %d Pods before each boltinformer start (%s)\n", p.Label, p.Changes.Total(), r.Pods, p.Changes)
		t := w.Table("start", "synced s", "× cg", "handlers done s", "× cg", "consistent s", "durable s", "MiB encoded", "× full list", "MiB wire", "× full list",
			"apiserver CPU-s", "etcd CPU-s", "client CPU-s", "LIST", "metadata pages", "fetches", "watch-lists")
		full := p.Medians[fullListVariant(p.Medians)]
		for _, v := range recoverNames {
			m, ok := p.Medians[v]
			if !ok {
				continue
			}
			t.Row(recoverTitles[v], opt(m, mInformerSynced, f2), ratio(m[mInformerSynced], p.Headline[hBestSynced]),
				f2(m[mSync]), ratio(m[mSync], p.Headline[hBestHandlers]), opt(m, mReconcile, f2), opt(m, mDurable, f2),
				opt(m, mBodyMiB, f1), ratio(m[mBodyMiB], full[mBodyMiB]), opt(m, mWireMiB, f1), ratio(m[mWireMiB], full[mWireMiB]),
				opt(m, mAPICPU, f2), opt(m, mEtcdCPU, f2), opt(m, mClientCPU, f2),
				opt(m, mStartLists, f0), opt(m, mStartMetaLists, f0), opt(m, mStartFetches, f0), opt(m, mWatchLists, f0))
		}
		if m, ok := p.Medians[vBoltRecover]; ok {
			// A recovery whose first metadata page sent it to a full list
			// took the changed objects from that list.
			fetched, rest := "in "+opt(m, mRecRequests, f0)+" requests", "the rest (watch, consistent read)"
			perPod := f1(m[mMetaMiB]*(1<<20)/1000/float64(r.Pods)) + " KB a Pod"
			if m[mStartLists] > 0 {
				fetched, rest = "from one full list (the first metadata page showed many changed)", "the full list and the rest"
				perPod = "its first page"
			}
			w.Printf("    recovery (medians): the 410 to its metadata list %s s (a backoff, or the wait for the warm hand-off); %s unchanged, %s deleted, %s to fetch;\n"+
				"    %s fetched %s; metadata list to consistent %s s (the list and its diff %s s);\n"+
				"    encoded bytes: metadata list %s MiB (%s), fetches %s MiB, %s %s MiB\n",
				opt(m, mRecAfterWatchError, f2), opt(m, mRecUnchanged, f0), opt(m, mRecDeleted, f0), opt(m, mRecToFetch, f0), opt(m, mRecFetched, f0), fetched, opt(m, mRecDurationS, f2), opt(m, mRecListS, f2),
				opt(m, mMetaMiB, f1), perPod, opt(m, mFetchMiB, f1), rest, f1(m[mBodyMiB]-m[mMetaMiB]-m[mFetchMiB]))
		}
		r.printCauses(w, p)
	}
	w.Printf("%s\n", "\n    synced: informer HasSynced (for boltinformer, only once its store is consistent with a read taken at start); handlers done: every\n"+
		"    registration's HasSynced; consistent: the recovery's (or relist's) end; durable: that state committed to the file. × cg: over\n"+
		"    client-go's faster start (the lower median of its two modes). Bytes: read from the apiserver, as encoded (before gzip) and on the\n"+
		"    wire (TLS, gzip where the apiserver compressed: these generated Pods compress far better than real ones); × full list: over\n"+
		"    client-go protobuf LIST's. CPU: from start to synced (boltinformer: to durable). LIST: full-list requests (pages); metadata\n"+
		"    pages and fetches (lists of one object or one namespace) are a recovery's.")
	w.Printf("\n")
	cells := []string{"headline"}
	for _, p := range r.Points {
		cells = append(cells, p.Label)
	}
	t := w.Table(cells...)
	for _, h := range []struct{ title, name string }{
		{"recovery synced × client-go's faster start (target ≤ 0.4 at 1%)", hRecoverSynced},
		{"recovery every handler done × client-go's faster", hRecoverHandlers},
		{"recovery bytes as encoded × a full list (target ≤ 0.65)", hRecoverBytes},
		{"recovery bytes on the wire × a full list", hRecoverWire},
		{"recovery apiserver CPU × a full list's", hRecoverAPICPU},
		{"full-list fallback synced × client-go's faster (target ≤ 1.0)", hFallbackSynced},
		{"without Recovery (a relist) synced × client-go's faster", hRelistSynced},
		{"client-go's faster start, synced s", hBestSynced},
	} {
		cells := []string{h.title}
		for _, p := range r.Points {
			cells = append(cells, opt(p.Headline, h.name, f2))
		}
		t.Row(cells...)
	}
}

// printCauses says how the boltinformer starts began, where any did not
// as the point expects (resumed within the history, a recovery or a relist
// after a 410 beyond it).
func (r *recoverResult) printCauses(w *benchkit.Report, p *recoverPoint) {
	for _, v := range []string{vBoltRecover, vBoltRecoverFull, vBolt410} {
		var causes []string
		for _, run := range p.Runs[v] {
			causes = append(causes, strings.Join(run.Causes, ">"))
		}
		if len(causes) > 0 {
			w.Printf("    %s starts, per repetition: %s\n", v, strings.Join(causes, "  "))
		}
	}
}

// printDowntimes prints one row per downtime.
func (r *recoverResult) printDowntimes(w *benchkit.Report) {
	w.Printf("    Downtime is emulated, not waited out: a downtime d at %.0f Pod writes/s is %.0f·d writes, made at once before the start, on\n"+
		"    n·(1 − e^(−writes/n)) distinct Pods (what uniformly random writes touch; a Pod written twice is one change to an informer\n"+
		"    that was not watching). Up to %v (the watch history) the start resumes; beyond it kube-apiserver is restarted first.\n\n",
		r.Rate, r.Rate, secondsDuration(r.WindowSeconds))
	t := w.Table("down", "writes", "Pods changed", "history", "bolt synced s", "handlers done s", "bolt start", "client-go LIST s", "client-go watch-list s",
		"bolt × faster cg", "bolt MiB encoded", "client-go LIST MiB", "bolt apiserver CPU-s", "client-go LIST apiserver CPU-s")
	for _, p := range r.Points {
		bolt, list, wl := p.Medians[vBoltRecover], p.Medians[vClientGoProtoList], p.Medians[vClientGoProto]
		history := "kept"
		if p.Expired {
			history = "expired"
		}
		start := "-"
		if runs := p.Runs[vBoltRecover]; len(runs) > 0 {
			start = strings.Join(runs[0].Causes, ">")
		}
		t.Row(p.Label, fmt.Sprint(p.Writes), fmt.Sprint(p.Changes.Total()), history, opt(bolt, mInformerSynced, f2), opt(bolt, mSync, f2), start,
			opt(list, mInformerSynced, f2), opt(wl, mInformerSynced, f2), opt(p.Headline, hRecoverSynced, f2),
			opt(bolt, mBodyMiB, f1), opt(list, mBodyMiB, f1), opt(bolt, mAPICPU, f2), opt(list, mAPICPU, f2))
	}
	w.Printf("%s\n", "    synced: informer HasSynced (boltinformer: its store consistent with a read taken at start); bolt start: how the first\n"+
		"    repetition's start began (resumed, or relist-expired for a recovery after the 410); bytes as encoded by the apiserver.")
}

// secondsDuration prints seconds as a downtime: 75s, 2m.
func secondsDuration(s float64) string { return downtimeLabel(seconds(s)) }

// downtimeSeries are the plot's lines: metric of variant at each downtime.
var downtimeSeries = []struct {
	title, variant, metric, color, dash string
}{
	{"boltinformer (Recovery): synced", vBoltRecover, mInformerSynced, "#1f77b4", ""},
	{"boltinformer: every handler done", vBoltRecover, mSync, "#1f77b4", "2 3"},
	{"client-go watch-list: synced", vClientGoProto, mInformerSynced, "#ff7f0e", ""},
	{"client-go LIST: synced", vClientGoProtoList, mInformerSynced, "#ff7f0e", "6 4"},
}

// downtimePlot draws time to synced against downtime: the downtimes evenly
// spaced (0 s to 30 min on a linear axis would crowd every point within
// the history into its first pixels), a mark where the watch history ends.
func (r *recoverResult) downtimePlot() benchkit.Plot {
	window := secondsDuration(r.WindowSeconds)
	p := benchkit.Plot{Name: r.name(), Title: "Time to synced after a restart, against downtime",
		Subtitle: fmt.Sprintf("%s Pods · %.0f writes/s while down (emulated) · medians of %d · %s × %d · %s",
			benchkit.CountLabel(r.Pods), r.Rate, r.Reps, r.Machine.CPU, r.Machine.Cores, r.Date[:min(10, len(r.Date))]),
		XLabel: "downtime (points evenly spaced)", YLabel: "seconds from start",
		Notes: []string{fmt.Sprintf("Downtime d: %.0f·d Pod writes made at once", r.Rate), "before the start (not waited out);",
			fmt.Sprintf("beyond %s the apiserver is", window), "restarted first, so the watch history", "is gone and boltinformer recovers."}}
	for i, pt := range r.Points {
		p.Categories = append(p.Categories, pt.Label)
		if i > 0 && pt.Expired && !r.Points[i-1].Expired {
			p.Marks = append(p.Marks, benchkit.Mark{X: float64(i) - 0.5, Lines: []string{"← watch history " + window, "apiserver restarted →"}})
		}
	}
	for _, s := range downtimeSeries {
		line := benchkit.Series{Name: s.title, Color: s.color, Dash: s.dash, Dots: true}
		for i, pt := range r.Points {
			if v, ok := pt.Medians[s.variant][s.metric]; ok {
				line.Points = append(line.Points, [2]float64{float64(i), v})
			}
		}
		p.Series = append(p.Series, line)
	}
	return p
}
