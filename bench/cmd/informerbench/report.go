package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/boltinformer/boltinformer/internal/runstats"
)

// runReport is the report subcommand: print every saved result's tables.
func runReport(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	dir := fs.String("out", "bench/results", "Directory holding informerbench-*.json.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	results, err := loadResults(*dir)
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("report: no informerbench-*.json in %s", *dir)
	}
	for _, r := range results {
		printReport(out, r)
	}
	return nil
}

// printReport prints one size's medians as four tables (sync and memory,
// watch throughput, indexer latency, cache file) and the targets.
func printReport(w io.Writer, r *sizeResult) {
	med := r.Medians
	ref, _ := clientGoVariants(r.BoltContentType)
	jsonSync, jsonFrom, _ := bestClientGo(med, "application/json", mSync)
	likeSync, likeFrom, _ := bestClientGo(med, r.BoltContentType, mSync)
	shape, size := shapeRealistic, ""
	if !r.realistic() {
		shape = shapeSmall
	}
	if r.PodProtoBytes > 0 {
		size = fmt.Sprintf(" (%.1f KB of protobuf each)", r.PodProtoBytes/1000)
	}
	fmt.Fprintf(w, "\n=== %d %s Pods%s, medians of %d repetitions — %s\n", r.Pods, shape, size, r.Reps, r.Date)
	if len(r.LoadAvg) > 0 {
		fmt.Fprintf(w, "    1-minute load average after each child: %s (median %.1f)\n", loadList(r.LoadAvg), runstats.Median(r.LoadAvg))
	}
	if hb := r.Heartbeat; hb != nil {
		fmt.Fprintf(w, "    cluster heartbeat: Lease %s renewed every %.0f ms throughout (%d renewals, %d failed)\n", hb.Lease, 1000*hb.IntervalSeconds, hb.Renewed, hb.Failed)
	}
	fmt.Fprintf(w, "    %s × %d, %d GiB, Linux %s, %s, %s\n", r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGiB, r.Machine.Kernel, r.Machine.Go, r.Machine.Server)
	fmt.Fprintf(w, "    boltinformer talks %s. \"× client-go\" is sync time over the faster client-go mode in that format (%s),\n", r.BoltContentType, likeFrom)
	fmt.Fprintf(w, "    the like-for-like ratio; \"× JSON\" over the faster client-go JSON mode (%s);\n", orDash(jsonFrom))
	fmt.Fprintf(w, "    other ratios are to %s. %d Pods changed before each warm and 410 restart.\n\n", ref, r.Churn)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row("sync and memory", "synced s", "× client-go", "× JSON", "churn applied s", "reconciled s", "durable s", "LIST", "limit=1", "watch", "watch-list", "rewritten", "private MiB", "RSS MiB", "file", "peak MiB", "heap MiB")
	for _, v := range variantOrder {
		m, ok := med[v]
		if !ok {
			continue
		}
		row(variantTitles[v], f2(m[mSync]), ratio(m[mSync], likeSync), ratio(m[mSync], jsonSync),
			opt(m, mCaughtUp, f2), opt(m, mReconcile, f2), opt(m, mDurable, f2),
			f0(m[mLists]), f0(m[mProbes]), f0(m[mWatches]), f0(m[mWatchLists]), opt(m, mRewritten, f0),
			f0(m[mAnon]), f0(m[mRSS]), f0(m[mFileRSS]), f0(m[mPeakRSS]), f0(m[mHeap]))
	}
	tw.Flush()
	fmt.Fprintln(w, "    LIST: full lists (every page); limit=1: consistent reads of one object at resourceVersion \"\" (a warm start catching up);\n"+
		"    churn applied: the changes made while boltinformer was down applied (from Run on); private = RssAnon (VmRSS without mapped files);\n"+
		"    the child does not run in a cgroup of its own, so no memory.current")

	printStages(w, tw, r)

	fmt.Fprintln(w)
	row("control plane per start", "synced s", "LIST", "limit=1 reads", "metadata-list pages", "fetches", "MiB on the wire", "MiB encoded", "apiserver CPU s", "etcd CPU s", "client CPU s")
	for _, v := range variantOrder {
		m, ok := med[v]
		if !ok {
			continue
		}
		row(variantTitles[v], f2(m[mSync]), opt(m, mStartLists, f0), opt(m, mStartProbes, f0), opt(m, mStartMetaLists, f0), opt(m, mStartFetches, f0),
			opt(m, mWireMiB, f1), opt(m, mBodyMiB, f1), opt(m, mAPICPU, f2), opt(m, mEtcdCPU, f2), opt(m, mClientCPU, f2))
	}
	tw.Flush()
	fmt.Fprintf(w, "    from informer start to synced (boltinformer: caught up, reconciled and durable); idle apiserver %.3f CPU-s/s, etcd %.3f;\n"+
		"    metadata-list pages and fetches (lists of one object or one namespace) are a recovery's requests\n",
		r.IdleAPIServerCPU, r.IdleEtcdCPU)

	fmt.Fprintln(w)
	refM, warm := med[ref], med[vBoltWarm]
	_, refTP := refM[mEventsPerS]
	if _, warmTP := warm[mEventsPerS]; refTP || warmTP { // not with --updates 0
		row("watch throughput (backlog drain)", ref, "boltinformer warm", "ratio")
		row("updates/s delivered to the handler", opt(refM, mEventsPerS, f0), opt(warm, mEventsPerS, f0), ratio(warm[mEventsPerS], refM[mEventsPerS]))
		row("updates/s delivered and committed", "-", opt(warm, mDurablePerS, f0), ratio(warm[mDurablePerS], refM[mEventsPerS]))
		row("CPU µs per update (whole process)", opt(refM, mCPUPerEvent, f1), opt(warm, mCPUPerEvent, f1), ratio(warm[mCPUPerEvent], refM[mCPUPerEvent]))
		row("backlog MiB (watch bytes held)", opt(refM, mBacklog, f1), opt(warm, mBacklog, f1), "")
		row("parent's patch rate /s (apiserver-bound)", opt(refM, mDriveRate, f0), opt(warm, mDriveRate, f0), "")
		row("committed RV behind applied, p50 / max revisions", "-", opt(warm, mLagP50, f0)+" / "+opt(warm, mLagMax, f0), "")
		row("last update committed after ms", "-", opt(warm, mDurableMs, f1), "")
		tw.Flush()
		fmt.Fprintln(w)
	}

	bounded := med[vBoltBounded]
	row("indexer latency", ref, "boltinformer hot", "ratio", "bolt 1,000-obj cache", "ratio")
	for _, l := range []struct{ name, metric string }{{"Get ns", mGet}, {"ByIndex(namespace) µs", mByIndex}, {"List ms", mList}} {
		row(l.name, opt(refM, l.metric, f1), opt(warm, l.metric, f1), ratio(warm[l.metric], refM[l.metric]),
			opt(bounded, l.metric, f1), ratio(bounded[l.metric], refM[l.metric]))
	}
	tw.Flush()

	if cold, ok := med[vBoltCold]; ok {
		printFile(w, tw, cold)
	}

	fmt.Fprintln(w, "\ntargets:")
	for _, t := range r.Targets {
		fmt.Fprintf(w, "  %-14s %s\n  %14s %s\n", "["+t.Status+"]", t.Goal, "", t.Detail)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// printFile prints where the cache file's bytes go, from the cold start.
func printFile(w io.Writer, tw *tabwriter.Writer, cold map[string]float64) {
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	fmt.Fprintln(w)
	row("cache file (after cold sync)", "MiB", "× protobuf")
	row("file size", opt(cold, mFile, f1), ratio(cold[mFile], cold[mProto]))
	row("  below bbolt's high-water mark", opt(cold, mData, f1), ratio(cold[mData], cold[mProto]))
	row("  free pages", opt(cold, mFree, f1), ratio(cold[mFree], cold[mProto]))
	row("  objects bucket pages", opt(cold, mObjAlloc, f1), ratio(cold[mObjAlloc], cold[mProto]))
	row("  objects bucket bytes in use", opt(cold, mObjInuse, f1), ratio(cold[mObjInuse], cold[mProto]))
	row("  index bucket pages", opt(cold, mIdxAlloc, f1), ratio(cold[mIdxAlloc], cold[mProto]))
	row("stored records", opt(cold, mRecords, f1), ratio(cold[mRecords], cold[mProto]))
	row("objects as protobuf", opt(cold, mProto, f1), "1.00")
	tw.Flush()
}

// printStages prints each start's stages beside client-go like for like
// and the decode floor (ratios.go).
func printStages(w io.Writer, tw *tabwriter.Writer, r *sizeResult) {
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
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
	fmt.Fprintln(w)
	row("start stages (from construction)", "Run called ms", "first watch ms", "informer synced ms", "after watch ms", "× client-go", "first List done ms", "× client-go",
		"every handler synced s", "× client-go", "handler 1 · 2 s", "× decode floor")
	shown := false
	for _, v := range variantOrder {
		m, ok := r.Medians[v]
		if !ok || m[mInformerSynced] == 0 {
			continue
		}
		shown = true
		row(variantTitles[v], opt(m, mConstruct, ms), opt(m, mFirstWatch, ms), opt(m, mInformerSynced, ms), opt(m, mSyncedAfterWatch, ms), rat(v, mInformerSynced, ref),
			opt(m, mFirstList, ms), rat(v, mFirstList, ref),
			f2(m[mSync]), rat(v, mSync, ref),
			opt(m, fmt.Sprintf(mHandlerSynced, 1), f2)+" · "+opt(m, fmt.Sprintf(mHandlerSynced, 2), f2),
			rat(v, mSync, floorMetric(v)))
	}
	if !shown {
		return
	}
	tw.Flush()
	fmt.Fprintf(w, "    \"Run called\": informer built (boltinformer: file opened) and handlers added; \"first watch\": the apiserver accepted\n"+
		"    boltinformer's first watch; \"after watch\": informer synced minus first watch (negative: synced before the watch opened);\n"+
		"    \"× client-go\" is over %s (like for like);\n", orDash(ref))
	fmt.Fprintln(w, "    \"× decode floor\" is every handler synced over decoding the same objects alone on all cores")
	if fl, ok := r.Medians[vFloor]; ok {
		workers := 0
		if runs := r.Runs[vFloor]; len(runs) > 0 && runs[0].Floor != nil {
			workers = runs[0].Floor.Workers
		}
		fmt.Fprintf(w, "    decode floor (%d goroutines, no informer): the file's records with boltinformer's codec %.2f s as a fresh process's first work\n"+
			"    (the floor a warm start is divided by), %.2f s once the heap has grown; the same Pods' bare protobuf %.2f s once grown\n",
			workers, fl[mFloorCodecFresh], fl[mFloorCodec], fl[mFloorProto])
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func loadList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f1(x)
	}
	return strings.Join(s, " ")
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
