package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
)

// runDemo is `make demo`: a local apiserver with a few thousand Pods;
// client-go's cold start in protobuf (boltinformer's wire format, the
// headline) and in JSON, a boltinformer cold start and warm restart, each in
// its own process, repeated with the order reversed every other time; then
// one restart after a forced 410; and a hot snapshot of the cache file for
// inspect. Everything it starts is torn down before it returns.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	pods := fs.Int("pods", 3000, "Pods to create.")
	reps := fs.Int("reps", 3, "Repetitions of each variant (medians are shown); every other one runs in reverse order.")
	shape := shapeRealistic
	fs.Var(&shape, "pod-size", "Pods to create: realistic (about 6 KB of protobuf) or small (about 2.7 KB).")
	snapshot := fs.String("snapshot", "", "Write a hot snapshot of the cache file here (for inspect).")
	workers := fs.Int("workers", 48, "Concurrent requests when creating Pods.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pods < 1 || *reps < 1 {
		return fmt.Errorf("--pods and --reps must be positive")
	}
	work, err := mkWorkDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cl, err := connect(ctx, "", work, out)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "\nstopping kube-apiserver and etcd, removing their data…")
		cl.close()
	}()
	cs, err := cl.clientset()
	if err != nil {
		return err
	}
	if err := populate(ctx, cl, shape, *pods, *workers, out); err != nil {
		return err
	}
	podBytes, err := meanPodBytes(ctx, cs, shape)
	if err != nil {
		return err
	}
	// A live cluster's background writes (heartbeat.go), for every variant.
	stopHeartbeat, err := apiservertest.Heartbeat(ctx, cs, heartbeatLease)
	if err != nil {
		return err
	}
	defer stopHeartbeat()

	file := filepath.Join(work, "cache.db")
	spec := func(variant, informer, contentType string) childSpec {
		s := childSpec{
			Variant: variant, Informer: informer, ContentType: contentType,
			Kubeconfig: cl.kubeconfig, Selector: shape.selector(), Expect: *pods,
		}
		s.APIServerPID, s.EtcdPID = cl.pids()
		if informer == informerBolt {
			s.File = file
		}
		return s
	}
	results := map[string][]*childResult{}
	var loads []float64
	run := func(s childSpec, title string) (*childResult, error) {
		res, err := spawn(ctx, s, filepath.Join(work, s.Variant+".log"), nil)
		if err != nil {
			return nil, err
		}
		loads = append(loads, loadAverage())
		fmt.Fprintf(out, "  %-44s informer synced %v, every handler synced %v\n", title, seconds(res.InformerSyncedSeconds), seconds(res.SyncSeconds))
		return res, nil
	}

	// The apiserver's watch cache memoizes each object's serialization per
	// wire format: the first informer to ask for a format pays the encoding
	// and the next ones do not. Warm both formats up, unmeasured, so that
	// no variant pays for the others.
	fmt.Fprintln(out, "warming up the apiserver's watch cache in both wire formats (not measured)…")
	for _, ct := range []string{protobufContentType, "application/json"} {
		if _, err := run(spec("warm-up", informerClientGo, ct), "client-go "+ct); err != nil {
			return err
		}
	}

	churn := min(max(*pods/100, 10), *pods)
	clientGo := func(variant, contentType, title string) func(rep int) error {
		return func(int) error {
			res, err := run(spec(variant, informerClientGo, contentType), title)
			if err == nil {
				results[variant] = append(results[variant], res)
			}
			return err
		}
	}
	bolt := func(rep int) error {
		cold := spec(vBoltCold, informerBolt, protobufContentType)
		cold.Fresh = true
		res, err := run(cold, variantTitles[vBoltCold])
		if err != nil {
			return err
		}
		results[vBoltCold] = append(results[vBoltCold], res)
		warm := spec(vBoltWarm, informerBolt, protobufContentType)
		if _, warm.CatchUpRV, err = patchPods(ctx, cs, shape, *pods, churn, *workers, newTag("demo")); err != nil {
			return err
		}
		if rep == *reps-1 {
			warm.Snapshot = *snapshot
		}
		if res, err = run(warm, fmt.Sprintf("%s (%d Pods changed first)", variantTitles[vBoltWarm], churn)); err != nil {
			return err
		}
		if res.Lists != 0 || res.StartCause != "resumed" {
			return fmt.Errorf("the warm restart listed (%d LIST requests, start %q), which it should not", res.Lists, res.StartCause)
		}
		results[vBoltWarm] = append(results[vBoltWarm], res)
		return nil
	}
	steps := []func(int) error{
		clientGo(vClientGoProto, protobufContentType, variantTitles[vClientGoProto]),
		clientGo(vClientGoJSON, "application/json", variantTitles[vClientGoJSON]),
		bolt,
	}
	for rep := range *reps {
		fmt.Fprintf(out, "repetition %d/%d, each informer in its own process:\n", rep+1, *reps)
		order := slices.Clone(steps)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, step := range order {
			if err := step(rep); err != nil {
				return err
			}
		}
	}

	// Once: the restart after a 410, which relists; what it costs the
	// apiserver is the point here.
	if _, _, err := patchPods(ctx, cs, shape, *pods, churn, *workers, newTag("demo-expired")); err != nil {
		return err
	}
	fmt.Fprintln(out, "restarting kube-apiserver (expires the stored resourceVersion)…")
	if err := cl.expire(ctx); err != nil {
		return err
	}
	expired := spec(vBolt410, informerBolt, protobufContentType)
	expired.WaitRelist = true
	res, err := run(expired, variantTitles[vBolt410])
	if err != nil {
		return err
	}
	results[vBolt410] = []*childResult{res}

	printDemo(out, *pods, *reps, shape, podBytes, churn, loads, results)
	if *snapshot != "" {
		fmt.Fprintf(out, "A hot snapshot of the cache file, taken during the last warm restart, is at %s.\n", *snapshot)
	}
	return nil
}

// printDemo prints the demo's table and its headline: boltinformer's warm
// restart against client-go in the same wire format.
func printDemo(out io.Writer, pods, reps int, shape podShape, podBytes float64, churn int, loads []float64, results map[string][]*childResult) {
	fmt.Fprintf(out, "\n%d %s Pods (%.1f KB of protobuf each) on a local kube-apiserver; medians of %d runs, order reversed every other run;\n"+
		"1-minute load average during the runs %s–%s. Control-plane cost: from start to synced (boltinformer: caught up, durable).\n\n",
		pods, shape, podBytes/1000, reps, f1(slices.Min(loads)), f1(slices.Max(loads)))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tinformer synced\thandlers synced (min–max)\tLIST\twatch-list\tprivate MiB\tRSS MiB\tMiB on the wire\tMiB encoded\tapiserver CPU-s\t")
	for _, v := range []string{vClientGoProto, vClientGoJSON, vBoltCold, vBoltWarm, vBolt410} {
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
		title := variantTitles[v]
		if v == vBolt410 {
			title += " (one run)"
			spread = fmt.Sprintf(", reconciled %v", seconds(m[mReconcile]))
		}
		fmt.Fprintf(tw, "%s\t%v\t%v%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", title, seconds(m[mInformerSynced]), seconds(m[mSync]), spread,
			f0(m[mStartLists]), f0(m[mWatchLists]), f0(m[mAnon]), f0(m[mRSS]), f1(m[mWireMiB]), f1(m[mBodyMiB]), opt(m, mAPICPU, f2))
	}
	tw.Flush()
	fmt.Fprintln(out, "private = RssAnon, memory no other process can reclaim (RSS also counts the mapped cache file); on the wire:\n"+
		"TLS bytes read, where a LIST is gzipped (these generated Pods compress far better than real ones); encoded: before gzip.")

	proto, js, warm := medians(results[vClientGoProto]), medians(results[vClientGoJSON]), medians(results[vBoltWarm])
	fmt.Fprintf(out, "\nThe warm restart's informer was synced — caught up with a consistent read, without a full LIST — after %v,\n"+
		"%v after its watch opened (%d limit=1 reads; with SyncedAtOpen it would be synced on the stored state at once). Its handlers\n"+
		"had all of their initial adds %s client-go's cold start in the same wire format (protobuf, in\n"+
		"client-go's default watch-list mode; its LIST mode can be faster, see docs/benchmarks.md), %s client-go\n"+
		"in JSON, with 0 LIST requests; the apiserver encoded %.0f× fewer bytes for it than for\n"+
		"client-go protobuf and spent %s of its CPU time. Its handlers got the %d stored Pods from the file; the %d Pods\n"+
		"changed meanwhile arrived as updates %v after start.\n",
		seconds(warm[mInformerSynced]), seconds(warm[mSyncedAfterWatch]), int(warm[mStartProbes]), sooner(warm[mSync], proto[mSync]), sooner(warm[mSync], js[mSync]), proto[mBodyMiB]/warm[mBodyMiB],
		cpuShare(warm[mAPICPU], proto[mAPICPU]), pods, churn, seconds(warm[mCaughtUp]))
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
	case x < 1.0/clockTicks:
		return fmt.Sprintf("under 10 ms against %.2f s", ref)
	case x >= ref:
		return fmt.Sprintf("%.1f×", x/ref)
	}
	return fmt.Sprintf("1/%.0f", ref/x)
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
