package main

import "fmt"

// target is one of the project's performance goals (warm restart, 410
// fallback, bounded RSS, file size), checked against a run's medians.
type target struct {
	Goal   string `json:"goal"`
	Status string `json:"status"` // "holds", "missed" or "not measured"
	Detail string `json:"detail"`
}

// bestClientGo returns the lower median of metric over client-go's two
// modes (watch-list and LIST), and the variant it came from: targets are
// checked against client-go at its best.
func bestClientGo(med map[string]map[string]float64, metric string) (float64, string, bool) {
	best, from, found := 0.0, "", false
	for _, v := range []string{vClientGoProto, vClientGoProtoList} {
		if x, ok := med[v][metric]; ok && (!found || x < best) {
			best, from, found = x, v, true
		}
	}
	return best, from, found
}

// checkTarget is a goal's status: "not measured" unless ok, else "holds"
// or "missed", with detail formatted from args.
func checkTarget(goal string, ok, holds bool, detail string, args ...any) target {
	t := target{Goal: goal, Status: "not measured"}
	if ok {
		t.Status, t.Detail = "missed", fmt.Sprintf(detail, args...)
		if holds {
			t.Status = "holds"
		}
	}
	return t
}

// evaluateTargets checks the goals; a goal whose inputs are missing is
// "not measured". Each is compared with client-go in protobuf, as
// boltinformer talks.
func evaluateTargets(med map[string]map[string]float64, churn int) []target {
	get := func(variant, metric string) (float64, bool) {
		v, ok := med[variant][metric]
		return v, ok
	}
	var ts []target

	afterWatch, ok1 := get(vBoltWarm, mSyncedAfterWatch)
	synced, _ := get(vBoltWarm, mInformerSynced)
	startLists, _ := get(vBoltWarm, mStartLists)
	probes, _ := get(vBoltWarm, mStartProbes)
	ts = append(ts, checkTarget("warm restart (default): informer HasSynced, caught up with a consistent read, ≤ 2 s after the watch opened, 0 full LISTs",
		ok1, afterWatch <= 2 && startLists == 0,
		"%.2f s after the watch opened (%.2f s after construction), %.0f full LISTs, %.0f limit=1 reads", afterWatch, synced, startLists, probes))

	synced, ok1 = get(vBoltWarmAtOpen, mInformerSynced)
	built, _ := get(vBoltWarmAtOpen, mConstruct)
	ts = append(ts, checkTarget("warm restart with SyncedAtOpen: informer HasSynced ≤ 10 ms after Run, the file open",
		ok1, synced-built <= 0.010, "%.1f ms after Run (%.1f ms after construction, which opened the file)", 1000*(synced-built), 1000*synced))

	rec, ok1 := get(vBolt410, mReconcile)
	refCold, refFrom, ok2 := bestClientGo(med, mSync)
	rewritten, _ := get(vBolt410, mRewritten)
	ts = append(ts, checkTarget("410 fallback ≤ 1.1× client-go cold; only changed objects rewritten",
		ok1 && ok2, rec <= 1.1*refCold && rewritten <= float64(churn),
		"relisted and reconciled %.2f s after start = %.2f× %s (%.2f s); %.0f objects rewritten, %d changed while down",
		rec, rec/refCold, refFrom, refCold, rewritten, churn))

	recSynced, ok1 := get(vBoltRecover, mInformerSynced)
	bestSynced, bestFrom, ok2 := bestClientGo(med, mInformerSynced)
	recLists, _ := get(vBoltRecover, mStartLists)
	ts = append(ts, checkTarget(fmt.Sprintf("restart after 410 with Recovery (%d Pods changed): informer synced ≤ 0.4× client-go's faster start, no full LIST", churn),
		ok1 && ok2, recSynced <= 0.4*bestSynced && recLists == 0,
		"synced %.2f s after start = %.2f× %s (%.2f s); %.0f full LISTs", recSynced, recSynced/bestSynced, bestFrom, bestSynced, recLists))

	bounded, ok1 := get(vBoltBounded, mRSS)
	anon, _ := get(vBoltBounded, mAnon)
	refRSS, rssFrom, ok2 := bestClientGo(med, mRSS)
	ts = append(ts, checkTarget("RSS after sync, bounded-memory mode ≤ 1/5 of client-go",
		ok1 && ok2, bounded <= refRSS/5,
		"VmRSS %.0f MiB (of which %.0f MiB private, the rest mapped cache-file pages) vs %s %.0f MiB = 1/%.1f (private: 1/%.1f)",
		bounded, anon, rssFrom, refRSS, refRSS/bounded, refRSS/anon))

	file, ok1 := get(vBoltCold, mFile)
	proto, ok2 := get(vBoltCold, mProto)
	ts = append(ts, checkTarget("file size ≤ 1.5× the objects' protobuf bytes",
		ok1 && ok2, file <= 1.5*proto,
		"%.1f MiB file vs %.1f MiB protobuf = %.2f×", file, proto, file/proto))
	return ts
}
