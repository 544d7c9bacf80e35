package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/runstats"
	"github.com/boltinformer/boltinformer/reflector"
)

// runDemo is `make demo`, on the main bench's sizeRun: a local apiserver
// with a few thousand Pods; client-go's cold start in protobuf
// (boltinformer's wire format, the headline) and in JSON, a boltinformer
// cold start and warm restart, each in its own process, repeated with the
// order rotated between repetitions; then
// one restart after a forced 410 that recovers by what changed, and one
// without Recovery (the full-relist fallback); and a hot snapshot of the
// cache file for inspect. boltinformer's informer is set up as the typed
// factory sets it up (InformerOptions.Recovery, a metadata lister of the
// same Pods), with WarmListBelow's default: the demo's collection is below
// it, so the warm restart, which resumes its watch, also takes a
// consistent metadata list and is synced once its store holds the listed
// versions, instead of waiting for the apiserver's bookmark. Everything it
// starts is torn down before it returns.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	opts := &benchOptions{contentType: protobufContentType, shape: shapeRealistic}
	pods := fs.Int("pods", 3000, "Pods to create.")
	fs.IntVar(&opts.reps, "reps", 3, "Repetitions of each variant (medians are shown); the order rotates between them.")
	fs.Var(&opts.shape, "pod-size", "Pods to create: realistic (about 6 KB of protobuf) or small (about 2.7 KB).")
	snapshot := fs.String("snapshot", "", "Write a hot snapshot of the cache file here (for inspect).")
	fs.IntVar(&opts.workers, "workers", 48, "Concurrent requests when creating Pods.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.sizes = []int{*pods}
	if err := opts.validate(); err != nil {
		return err
	}
	sess, err := openSession(ctx, &opts.logDir, nil, out)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "\nstopping kube-apiserver and etcd, removing their data…")
		sess.close()
	}()
	// A live cluster's background writes (the heartbeat), for every variant.
	podBytes, stopHeartbeat, err := readyPods(ctx, sess.cl, sess.cs, opts.shape, *pods, opts.workers, out)
	if err != nil {
		return err
	}
	defer stopHeartbeat()

	reps := opts.reps
	r := &sizeRun{cl: sess.cl, cs: sess.cs, opts: opts, n: *pods, file: filepath.Join(sess.work, "cache.db"), log: out,
		runs: map[string][]*childResult{}, brief: true}
	// The warm restart is the typed factory's informer (with Recovery);
	// its last one writes the snapshot, and none times the indexer.
	r.tweak = func(rep int, s *childSpec) {
		if s.Variant == vBoltWarm {
			s.Recovery, s.Latency = true, false
			if rep == reps-1 {
				s.Snapshot = *snapshot
			}
		}
	}
	fmt.Fprintln(out, "warming up the apiserver's watch cache in both wire formats (not measured), then each informer in its own process:")
	opts.variants = map[string]bool{vClientGoProto: true, vClientGoJSON: true, vBoltCold: true, vBoltWarm: true}
	if err := r.measure(ctx); err != nil {
		return err
	}
	for _, res := range r.runs[vBoltWarm] {
		if res.Lists != 0 || res.StartCause != string(reflector.CauseResumed) {
			return fmt.Errorf("the warm restart listed in full (%d LIST requests, start %q), which it should not", res.Lists, res.StartCause)
		}
	}
	// Once each: a restart after a 410 (the apiserver restarted: its watch
	// history is gone), recovering by what changed; and, for comparison,
	// the same without Recovery, which relists in full. The recovering one
	// has WarmListBelow's default, as a user's informer would: its
	// consistent metadata list for the proof by versions is made beside the
	// recovery's, and dropped when the 410 arrives.
	opts.variants, opts.reps = map[string]bool{vBoltRecover: true, vBolt410: true}, 1
	if err := r.measure(ctx); err != nil {
		return err
	}
	printDemo(out, *pods, reps, opts.shape, podBytes, opts.churnFor(*pods), r.load, r.runs)
	if *snapshot != "" {
		fmt.Fprintf(out, "A hot snapshot of the cache file, taken during the last warm restart, is at %s.\n", *snapshot)
	}
	return nil
}

// demoTitles are the demo's names of its starts.
var demoTitles = map[string]string{
	vClientGoProto: variantTitles[vClientGoProto],
	vClientGoJSON:  variantTitles[vClientGoJSON],
	vBoltCold:      variantTitles[vBoltCold],
	vBoltWarm:      "boltinformer warm restart",
	vBoltRecover:   "boltinformer restart after 410, recovering",
	vBolt410:       "boltinformer restart after 410, full relist (no Recovery)",
}

// printDemo prints the demo's table and its headline: boltinformer's warm
// restart against client-go in the same wire format.
func printDemo(out io.Writer, pods, reps int, shape podShape, podBytes float64, churn int, loads []float64, results map[string][]*childResult) {
	fmt.Fprintf(out, "\n%d %s Pods (%.1f KB of protobuf each) on a local kube-apiserver; medians of %d runs, order rotated between runs;\n"+
		"1-minute load average during the runs %s–%s. Control-plane cost: from start to synced (boltinformer: caught up, durable).\n\n",
		pods, shape, podBytes/1000, reps, f1(slices.Min(loads)), f1(slices.Max(loads)))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tinformer synced\thandlers synced (min–max)\tLIST\tmetadata pages\tfetches\twatch-list\tprivate MiB\tRSS MiB\tMiB on the wire\tMiB encoded\tapiserver CPU-s\t")
	for _, v := range []string{vClientGoProto, vClientGoJSON, vBoltCold, vBoltWarm, vBoltRecover, vBolt410} {
		runs := results[v]
		if len(runs) == 0 {
			continue
		}
		m := medians(runs)
		syncs := make([]float64, len(runs))
		for i, r := range runs {
			syncs[i] = r.SyncSeconds
		}
		spread := ""
		if len(runs) > 1 {
			spread = fmt.Sprintf(" (%v–%v)", seconds(slices.Min(syncs)), seconds(slices.Max(syncs)))
		}
		title := demoTitles[v]
		if v == vBolt410 || v == vBoltRecover {
			title += " (one run)"
			spread = fmt.Sprintf(", consistent %v", seconds(m[mReconcile]))
		}
		fmt.Fprintf(tw, "%s\t%v\t%v%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", title, seconds(m[mInformerSynced]), seconds(m[mSync]), spread,
			f0(m[mStartLists]), f0(m[mStartMetaLists]), f0(m[mStartFetches]), f0(m[mWatchLists]), f0(m[mAnon]), f0(m[mRSS]), f1(m[mWireMiB]), f1(m[mBodyMiB]), opt(m, mAPICPU, f2))
	}
	tw.Flush()
	fmt.Fprintln(out, "private = RssAnon, memory no other process can reclaim (RSS also counts the mapped cache file); on the wire:\n"+
		"TLS bytes read, where a LIST is gzipped (these generated Pods compress far better than real ones); encoded: before gzip;\n"+
		"metadata pages and fetches (lists of one object or one namespace) are a recovery's requests.")

	proto, js, warm := medians(results[vClientGoProto]), medians(results[vClientGoJSON]), medians(results[vBoltWarm])
	how := fmt.Sprintf("It resumed its watch and was synced %v after the watch opened (%d limit=1 reads).",
		seconds(warm[mSyncedAfterWatch]), int(warm[mStartProbes]))
	if warm[mStartMetaLists] > 0 {
		how = fmt.Sprintf("It resumed its watch and, its %d Pods being below WarmListBelow (%d), took a consistent metadata list\n"+
			"(%.0f pages) and was synced once its store held the listed versions, %v after the watch opened: the watch\n"+
			"replayed the %d changes made while it was down, and no bookmark was waited for.",
			pods, bcache.DefaultWarmListBelow, warm[mStartMetaLists], seconds(warm[mSyncedAfterWatch]), churn)
	}
	fmt.Fprintf(out, "\nThe warm restart's informer was synced — caught up with a consistent read, without a full LIST — after %v,\n"+
		"%s client-go's protobuf cold start (%v; make demo's target is at most 0.5×: %s).\n%s\n"+
		"With SyncedAtOpen it would be synced on the stored state at once. Its handlers had all of their initial adds %s\n"+
		"client-go's cold start in the same wire format (protobuf, in client-go's default watch-list mode; its LIST mode can be\n"+
		"faster, see docs/benchmarks.md), %s client-go in JSON, with 0 LIST requests; the apiserver encoded %.2f× the bytes\n"+
		"it encoded for client-go protobuf and spent %s of its CPU time. Its handlers got the %d stored Pods from the file;\n"+
		"the %d Pods changed meanwhile arrived as updates %v after start.\n",
		seconds(warm[mInformerSynced]), timesOf(warm[mInformerSynced], proto[mInformerSynced]), seconds(proto[mInformerSynced]),
		holds(warm[mInformerSynced] <= 0.5*proto[mInformerSynced]), how,
		sooner(warm[mSync], proto[mSync]), sooner(warm[mSync], js[mSync]), warm[mBodyMiB]/proto[mBodyMiB],
		cpuShare(warm[mAPICPU], proto[mAPICPU]), pods, churn, seconds(warm[mCaughtUp]))
	if rec, fb := medians(results[vBoltRecover]), medians(results[vBolt410]); len(rec) > 0 {
		fmt.Fprintf(out, "\nAfter a 410 (the apiserver restarted, its watch history gone) the restart with Recovery listed the Pods' metadata\n"+
			"(%.0f pages), found %.0f changed, fetched them in %.0f requests and was synced after %v, %s client-go's protobuf\n"+
			"cold start, reading %.1f MiB as encoded (client-go: %.1f MiB).",
			rec[mStartMetaLists], rec[mRecToFetch], rec[mStartFetches], seconds(rec[mInformerSynced]), timesOf(rec[mInformerSynced], proto[mInformerSynced]),
			rec[mBodyMiB], proto[mBodyMiB])
		if len(fb) > 0 {
			fmt.Fprintf(out, " Without Recovery it relists in full:\nsynced after %v, %s client-go, %.1f MiB.", seconds(fb[mInformerSynced]), timesOf(fb[mInformerSynced], proto[mInformerSynced]), fb[mBodyMiB])
		}
		fmt.Fprintln(out)
	}
}

// timesOf says what multiple of ref x is, e.g. "0.42×".
func timesOf(x, ref float64) string {
	if ref <= 0 {
		return "an unknown multiple of"
	}
	return fmt.Sprintf("%.2f×", x/ref)
}

// holds says whether a target holds.
func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "missed"
}

// sooner compares a time x with ref: "2.1× sooner than" or "1.3× later than".
func sooner(x, ref float64) string {
	if x <= ref {
		return fmt.Sprintf("%.1f× sooner than", ref/x)
	}
	return fmt.Sprintf("%.1f× later than", x/ref)
}

// cpuShare says what fraction of ref the CPU time x is; /proc counts in
// 10 ms ticks.
func cpuShare(x, ref float64) string {
	switch {
	case ref <= 0:
		return "an unknown fraction"
	case x < 1.0/runstats.ClockTicks:
		return fmt.Sprintf("under 10 ms against %.2f s", ref)
	case x >= ref:
		return fmt.Sprintf("%.1f×", x/ref)
	}
	return fmt.Sprintf("1/%.0f", ref/x)
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
