package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/reflector"
)

// runDemo is `make demo`, on the main bench's sizeRun: a local apiserver
// with a few thousand Pods; client-go's cold start in protobuf
// (boltinformer's wire format), a boltinformer cold start and warm
// restart, each in its own process, repeated with the order rotated
// between repetitions; then one restart after a forced 410 that recovers by what changed, and one
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
	opts := &benchOptions{shape: shapeRealistic}
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
	// its last one writes the snapshot.
	r.tweak = func(rep int, s *childSpec) {
		if s.Variant == vBoltWarm {
			s.Recovery = true
			if rep == reps-1 {
				s.Snapshot = *snapshot
			}
		}
	}
	fmt.Fprintln(out, "warming up the apiserver's watch cache (not measured), then each informer in its own process:")
	opts.variants = map[string]bool{vClientGoProto: true, vBoltCold: true, vBoltWarm: true}
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
	if err := demoReport(*pods, reps, opts.shape, podBytes, opts.churnFor(*pods), r.load, r.runs).WriteText(out); err != nil {
		return err
	}
	if *snapshot != "" {
		fmt.Fprintf(out, "A hot snapshot of the cache file, taken during the last warm restart, is at %s.\n", *snapshot)
	}
	return nil
}

// demoTitles are the demo's names of its starts, in the table's order.
var demoTitles = []struct{ variant, title string }{
	{vClientGoProto, variantTitles[vClientGoProto]},
	{vBoltCold, variantTitles[vBoltCold]},
	{vBoltWarm, "boltinformer warm restart"},
	{vBoltRecover, "boltinformer restart after 410, recovering (one run)"},
	{vBolt410, "boltinformer restart after 410, full relist, no Recovery (one run)"},
}

// demoReport is the demo's table and its headline: boltinformer's warm
// restart against client-go's cold start, both in protobuf.
func demoReport(pods, reps int, shape podShape, podBytes float64, churn int, loads []float64, results map[string][]*childResult) *benchkit.Report {
	rep := &benchkit.Report{}
	rep.Printf("\n%d %s Pods (%.1f KB of protobuf each) on a local kube-apiserver; medians of %d runs, order rotated between runs;\n"+
		"1-minute load average during the runs %s–%s. Control-plane cost: from start to synced (boltinformer: caught up, durable).\n\n",
		pods, shape, podBytes/1000, reps, f1(slices.Min(loads)), f1(slices.Max(loads)))
	t := rep.Table("", "informer synced", "handlers synced", "consistent", "LIST", "metadata pages", "fetches", "watch-list", "private MiB", "RSS MiB", "MiB on the wire", "MiB encoded", "apiserver CPU-s")
	for _, d := range demoTitles {
		if runs := results[d.variant]; len(runs) > 0 {
			m := medians(runs)
			t.Row(d.title, seconds(m[mInformerSynced]).String(), seconds(m[mSync]).String(), opt(m, mReconcile, func(x float64) string { return seconds(x).String() }),
				f0(m[mStartLists]), f0(m[mStartMetaLists]), f0(m[mStartFetches]), f0(m[mWatchLists]), f0(m[mAnon]), f0(m[mRSS]), f1(m[mWireMiB]), f1(m[mBodyMiB]), opt(m, mAPICPU, f2))
		}
	}
	rep.Printf("private = RssAnon, memory no other process can reclaim (RSS also counts the mapped cache file); on the wire:\n" +
		"TLS bytes read, where a LIST is gzipped (these generated Pods compress far better than real ones); encoded: before gzip;\n" +
		"metadata pages and fetches (lists of one object or one namespace) are a recovery's requests.\n")

	proto, warm := medians(results[vClientGoProto]), medians(results[vBoltWarm])
	how := fmt.Sprintf("It resumed its watch and was synced %v after the watch opened (%d limit=1 reads).",
		seconds(warm[mSyncedAfterWatch]), int(warm[mStartProbes]))
	if warm[mStartMetaLists] > 0 {
		how = fmt.Sprintf("It resumed its watch and, its %d Pods being below WarmListBelow (%d), took a consistent metadata list\n"+
			"(%.0f pages) and was synced once its store held the listed versions, %v after the watch opened: the watch\n"+
			"replayed the %d changes made while it was down, and no bookmark was waited for.",
			pods, bcache.DefaultWarmListBelow, warm[mStartMetaLists], seconds(warm[mSyncedAfterWatch]), churn)
	}
	rep.Printf("\nThe warm restart's informer was synced — caught up with a consistent read, without a full LIST — after %v\n"+
		"(%s over %d runs), %s client-go's protobuf cold start (%v, %s; make demo's target is at most 0.5×: %s).\n%s\n"+
		"With SyncedAtOpen it would be synced on the stored state at once. Its handlers had all of their initial adds after %v\n"+
		"(%s client-go's, in its default watch-list mode; its LIST mode can be faster, see docs/benchmarks.md), with 0 LIST\n"+
		"requests; the apiserver encoded %s the bytes it encoded for client-go and spent %s its CPU time. Its handlers got\n"+
		"the %d stored Pods from the file; the %d Pods changed meanwhile arrived as updates %v after start.\n",
		seconds(warm[mInformerSynced]), spread(results[vBoltWarm], mInformerSynced), len(results[vBoltWarm]),
		timesOf(warm[mInformerSynced], proto[mInformerSynced]), seconds(proto[mInformerSynced]), spread(results[vClientGoProto], mInformerSynced),
		holds(warm[mInformerSynced] <= 0.5*proto[mInformerSynced]), how, seconds(warm[mSync]), timesOf(warm[mSync], proto[mSync]),
		timesOf(warm[mBodyMiB], proto[mBodyMiB]), timesOf(warm[mAPICPU], proto[mAPICPU]), pods, churn, seconds(warm[mCaughtUp]))
	if rec, fb := medians(results[vBoltRecover]), medians(results[vBolt410]); len(rec) > 0 {
		rep.Printf("\nAfter a 410 (the apiserver restarted, its watch history gone) the restart with Recovery listed the Pods' metadata\n"+
			"(%.0f pages), found %.0f changed, fetched them in %.0f requests and was synced after %v, %s client-go's protobuf\n"+
			"cold start, reading %.1f MiB as encoded (client-go: %.1f MiB).",
			rec[mStartMetaLists], rec[mRecToFetch], rec[mStartFetches], seconds(rec[mInformerSynced]), timesOf(rec[mInformerSynced], proto[mInformerSynced]),
			rec[mBodyMiB], proto[mBodyMiB])
		if len(fb) > 0 {
			rep.Printf(" Without Recovery it relists in full:\nsynced after %v, %s client-go, %.1f MiB.", seconds(fb[mInformerSynced]), timesOf(fb[mInformerSynced], proto[mInformerSynced]), fb[mBodyMiB])
		}
		rep.Printf("\n")
	}
	return rep
}

// spread is the least and the greatest of metric over runs, e.g.
// "69ms–285ms": a median hides a bimodal start.
func spread(runs []*childResult, metric string) string {
	var vs []float64
	for _, r := range runs {
		if v, ok := r.metrics()[metric]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return "no runs"
	}
	return fmt.Sprintf("%v–%v", seconds(slices.Min(vs)), seconds(slices.Max(vs)))
}

// timesOf says what multiple of ref x is, e.g. "0.42×".
func timesOf(x, ref float64) string {
	if ref <= 0 {
		return "an unknown multiple of"
	}
	return fmt.Sprintf("%.2f×", x/ref)
}

func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "missed"
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
