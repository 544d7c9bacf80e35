package main

import (
	"fmt"
	"strings"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
)

// sizeReport is one size's medians as tables (sync and memory, stages,
// control plane, cache file) and the
// targets.
func sizeReport(r *sizeResult) *benchkit.Report {
	rep := &benchkit.Report{}
	med := r.Medians
	ref := vClientGoProto
	likeSync, likeFrom, _ := bestClientGo(med, mSync)
	shape, size := shapeRealistic, ""
	if !r.realistic() {
		shape = shapeSmall
	}
	if r.PodProtoBytes > 0 {
		size = fmt.Sprintf(" (%.1f KB of protobuf each)", r.PodProtoBytes/1000)
	}
	rep.Printf("\n=== %d %s Pods%s, medians of %d repetitions — %s\n", r.Pods, shape, size, r.Reps, r.Date)
	r.printLoad(rep)
	if hb := r.Heartbeat; hb != nil {
		rep.Printf("    cluster heartbeat: Lease %s renewed every %.0f ms throughout (%d renewals, %d failed)\n", hb.Lease, 1000*hb.IntervalSeconds, hb.Renewed, hb.Failed)
	}
	rep.Printf("    %s\n", r.Machine)
	rep.Printf("    Both informers talk %s. \"× client-go\" is sync time over the faster client-go mode (%s), the like-for-like\n", r.BoltContentType, orDash(likeFrom))
	rep.Printf("    ratio; other ratios are to %s. %d Pods changed before each warm and 410 restart.\n\n", ref, r.Churn)

	t := rep.Table("sync and memory", "synced s", "× client-go", "churn applied s", "reconciled s", "durable s", "LIST", "limit=1", "watch", "watch-list", "rewritten", "private MiB", "RSS MiB", "file", "peak MiB", "heap MiB")
	for _, v := range variantOrder {
		m, ok := med[v]
		if !ok {
			continue
		}
		t.Row(variantTitles[v], f2(m[mSync]), ratio(m[mSync], likeSync),
			opt(m, mCaughtUp, f2), opt(m, mReconcile, f2), opt(m, mDurable, f2),
			f0(m[mLists]), f0(m[mProbes]), f0(m[mWatches]), f0(m[mWatchLists]), opt(m, mRewritten, f0),
			f0(m[mAnon]), f0(m[mRSS]), f0(m[mFileRSS]), f0(m[mPeakRSS]), f0(m[mHeap]))
	}
	rep.Printf("%s\n", "    LIST: full lists (every page); limit=1: consistent reads of one object at resourceVersion \"\" (a warm start catching up);\n"+
		"    churn applied: the changes made while boltinformer was down applied (from Run on); private = RssAnon (VmRSS without mapped files);\n"+
		"    the child does not run in a cgroup of its own, so no memory.current")

	printStages(rep, r)

	rep.Printf("\n")
	t = rep.Table("control plane per start", "synced s", "LIST", "limit=1 reads", "metadata-list pages", "fetches", "MiB on the wire", "MiB encoded", "apiserver CPU s", "etcd CPU s", "client CPU s")
	for _, v := range variantOrder {
		m, ok := med[v]
		if !ok {
			continue
		}
		t.Row(variantTitles[v], f2(m[mSync]), opt(m, mStartLists, f0), opt(m, mStartProbes, f0), opt(m, mStartMetaLists, f0), opt(m, mStartFetches, f0),
			opt(m, mWireMiB, f1), opt(m, mBodyMiB, f1), opt(m, mAPICPU, f2), opt(m, mEtcdCPU, f2), opt(m, mClientCPU, f2))
	}
	rep.Printf("    from informer start to synced (boltinformer: caught up, reconciled and durable); idle apiserver %.3f CPU-s/s, etcd %.3f;\n"+
		"    metadata-list pages and fetches (lists of one object or one namespace) are a recovery's requests\n",
		r.IdleAPIServerCPU, r.IdleEtcdCPU)

	if cold, ok := med[vBoltCold]; ok {
		printFile(rep, cold)
	}
	printTargets(rep, r.Targets)
	return rep
}

// printTargets lists each target's status, goal and detail.
func printTargets(rep *benchkit.Report, targets []target) {
	rep.Printf("\ntargets:\n")
	for _, t := range targets {
		rep.Printf("  %-14s %s\n  %14s %s\n", "["+t.Status+"]", t.Goal, "", t.Detail)
	}
}

// printFile prints where the cache file's bytes go, from the cold start.
func printFile(rep *benchkit.Report, cold map[string]float64) {
	rep.Printf("\n")
	t := rep.Table("cache file (after cold sync)", "MiB", "× protobuf")
	t.Row("file size", opt(cold, mFile, f1), ratio(cold[mFile], cold[mProto]))
	t.Row("stored records", opt(cold, mRecords, f1), ratio(cold[mRecords], cold[mProto]))
	t.Row("objects as protobuf", opt(cold, mProto, f1), "1.00")
}

// printStages prints each start's stages beside client-go like for like
// (ratios.go).
func printStages(rep *benchkit.Report, r *sizeResult) {
	ratios, ref := r.computeRatios(), r.likeForLike()
	rat := func(v, metric, refName string) string {
		if x, ok := ratios[v][metric+"_x_"+refName]; ok {
			return f2(x)
		}
		if v == ref && refName == ref {
			return "1.00"
		}
		return "-"
	}
	ms := func(x float64) string { return fmt.Sprintf("%.1f", 1000*x) }
	rep.Printf("\n")
	var t benchkit.Table
	rows := [][]string{{"start stages (from construction)", "Run called ms", "first watch ms", "informer synced ms", "after watch ms", "× client-go", "first List done ms", "× client-go",
		"every handler synced s", "× client-go", "handler 1 · 2 s"}}
	shown := false
	for _, v := range variantOrder {
		m, ok := r.Medians[v]
		if !ok || m[mInformerSynced] == 0 {
			continue
		}
		shown = true
		rows = append(rows, []string{variantTitles[v], opt(m, mConstruct, ms), opt(m, mFirstWatch, ms), opt(m, mInformerSynced, ms), opt(m, mSyncedAfterWatch, ms), rat(v, mInformerSynced, ref),
			opt(m, mFirstList, ms), rat(v, mFirstList, ref),
			f2(m[mSync]), rat(v, mSync, ref),
			opt(m, fmt.Sprintf(mHandlerSynced, 1), f2) + " · " + opt(m, fmt.Sprintf(mHandlerSynced, 2), f2)})
	}
	if !shown {
		return
	}
	t = rep.Table(rows[0]...)
	for _, row := range rows[1:] {
		t.Row(row...)
	}
	rep.Printf("    \"Run called\": informer built (boltinformer: file opened) and handlers added; \"first watch\": the apiserver accepted\n"+
		"    boltinformer's first watch; \"after watch\": informer synced minus first watch (negative: synced before the watch opened);\n"+
		"    \"× client-go\" is over %s (like for like)\n", orDash(ref))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printLoad prints the load average after each child, if there is one.
func (h runHeader) printLoad(rep *benchkit.Report) {
	if len(h.LoadAvg) == 0 {
		return
	}
	s := make([]string, len(h.LoadAvg))
	for i, x := range h.LoadAvg {
		s[i] = f1(x)
	}
	rep.Printf("    1-minute load average after each child: %s (median %.1f)\n", strings.Join(s, " "), runstats.Median(h.LoadAvg))
}

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

// opt formats m[k], or "-" if it was not measured.
func opt(m map[string]float64, k string, format func(float64) string) string {
	if v, ok := m[k]; ok {
		return format(v)
	}
	return "-"
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
