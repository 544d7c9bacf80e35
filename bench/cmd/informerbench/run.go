package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// sizeRun measures every variant at one number of Pods.
type sizeRun struct {
	cl   *cluster
	cs   kubernetes.Interface // the parent's client: churn
	opts *benchOptions
	n    int
	file string // boltinformer's cache file
	log  io.Writer
	runs map[string][]*childResult
	load []float64 // 1-minute load average after each child
	// filled: a cold start has filled file with this size's Pods;
	// warmedUp: the watch cache holds their encodings (warmUp).
	filled, warmedUp bool
	// tweak, if set, changes each child's spec before it is spawned.
	tweak func(rep int, spec *childSpec)
	// brief prints one short line per child instead of its summary.
	brief bool
}

// measure runs opts.reps repetitions of the selected variants. Each
// repetition runs every client-go variant and the boltinformer group (cold,
// warm, bounded and after 410, which must run in that order on one file), rotating the order between repetitions so that no
// variant always runs first after a quiet apiserver or right after a
// restart.
func (r *sizeRun) measure(ctx context.Context) error {
	var groups []func(context.Context, int) error
	for _, v := range []string{vClientGoProto, vClientGoProtoList} {
		if r.opts.runs(v) {
			groups = append(groups, r.clientGo(v, v == vClientGoProtoList))
		}
	}
	if r.opts.runs(vBoltCold) || slices.ContainsFunc(boltFileVariants, r.opts.runs) {
		groups = append(groups, r.bolt)
	}
	if len(groups) == 0 {
		return fmt.Errorf("no variant selected")
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	for rep := range r.opts.reps {
		for _, g := range benchkit.Rotate(groups, rep) {
			if err := g(ctx, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// warmUp runs client-go once, unmeasured: the apiserver's watch cache
// memoizes each object's serialization, so the first informer to ask for
// the Pods would pay for the encoding and the next ones not.
func (r *sizeRun) warmUp(ctx context.Context) error {
	if r.warmedUp {
		return nil
	}
	r.warmedUp = true
	spec := childSpec{Variant: "warm-up", Informer: informerClientGo,
		Kubeconfig: r.cl.kubeconfig, Selector: r.opts.shape.selector(), Expect: r.n}
	_, err := spawn(ctx, spec, filepath.Join(r.opts.logDir, "warm-up.log"))
	return err
}

// clientGo returns the step for a client-go variant.
func (r *sizeRun) clientGo(variant string, list bool) func(context.Context, int) error {
	return func(ctx context.Context, rep int) error {
		spec := childSpec{Variant: variant, Informer: informerClientGo, NoWatchList: list}
		return r.spawnChild(ctx, rep, spec, true)
	}
}

// bolt runs the selected boltinformer variants on one file: cold, then
// (each after some Pods changed while it was down) warm within the
// watch-cache window, synced when caught up (the default) and with
// SyncedAtOpen, in alternating order; warm with a bounded cache; then,
// each after more changes and an apiserver restart that expires the stored
// resourceVersion, in alternating order, warm with Recovery (it recovers
// by what changed) and without (a full relist, the fallback). The cold
// start runs if selected, or, unreported, to fill the file the first time
// another one needs it.
func (r *sizeRun) bolt(ctx context.Context, rep int) error {
	spec := func(v string) childSpec {
		return childSpec{Variant: v, Informer: informerBolt, File: r.file}
	}
	if report := r.opts.runs(vBoltCold); report || !r.filled {
		cold := spec(vBoltCold)
		cold.Fresh, cold.FileSize = true, report
		if err := r.spawnChild(ctx, rep, cold, report); err != nil {
			return err
		}
		r.filled = true
	}
	// The two warm starts, the default (synced when caught up) and
	// SyncedAtOpen, each after its own churn, in alternating order.
	for _, v := range benchkit.Rotate([]string{vBoltWarm, vBoltWarmAtOpen}, rep) {
		if !r.opts.runs(v) {
			continue
		}
		warm := spec(v)
		warm.SyncedAtOpen = v == vBoltWarmAtOpen
		var err error
		if warm.CatchUpRV, err = r.churn(ctx, v); err != nil {
			return err
		}
		if err := r.spawnChild(ctx, rep, warm, true); err != nil {
			return err
		}
	}
	if r.opts.runs(vBoltBounded) {
		bounded := spec(vBoltBounded)
		bounded.CacheObjects = boundedCacheObjects
		if err := r.spawnChild(ctx, rep, bounded, true); err != nil {
			return err
		}
	}
	// The two restarts after a 410, recovering (Recovery) and relisting
	// in full (the fallback), each after its own churn and apiserver
	// restart, in alternating order.
	for _, v := range benchkit.Rotate([]string{vBoltRecover, vBolt410}, rep) {
		if !r.opts.runs(v) {
			continue
		}
		if _, err := r.churn(ctx, "expired"); err != nil {
			return err
		}
		fmt.Fprintln(r.log, "    restarting kube-apiserver (expires every stored resourceVersion)…")
		if err := r.cl.expire(ctx); err != nil {
			return err
		}
		expired := spec(v)
		expired.WaitRelist, expired.Recovery = true, v == vBoltRecover
		if err := r.spawnChild(ctx, rep, expired, true); err != nil {
			return err
		}
	}
	return nil
}

// churn changes 1% of the Pods while no informer runs, and returns the
// last resourceVersion written.
func (r *sizeRun) churn(ctx context.Context, what string) (string, error) {
	m := r.opts.churnFor(r.n)
	rv, err := patchPods(ctx, r.cs, r.opts.shape, r.n, m, r.opts.workers, newTag("churn-"+what))
	if err == nil {
		fmt.Fprintf(r.log, "    patched %d Pods while boltinformer is down\n", m)
	}
	return rv, err
}

// spawnChild runs one variant in its own process and prints its summary;
// with record, it also keeps the result for the report.
func (r *sizeRun) spawnChild(ctx context.Context, rep int, spec childSpec, record bool) error {
	time.Sleep(r.opts.settle)
	name := fmt.Sprintf("%s-%s-rep%d", spec.Variant, benchkit.CountLabel(r.n), rep+1)
	spec.Kubeconfig, spec.Selector, spec.Expect = r.cl.kubeconfig, r.opts.shape.selector(), r.n
	spec.APIServerPID, spec.EtcdPID = r.cl.pids()
	if r.tweak != nil {
		r.tweak(rep, &spec)
	}
	res, err := spawn(ctx, spec, filepath.Join(r.opts.logDir, name+".log"))
	if err != nil {
		return err
	}
	note := ""
	if r.brief {
		fmt.Fprintf(r.log, "  %-56s informer synced %v, every handler synced %v\n", variantTitles[spec.Variant], seconds(res.InformerSyncedSeconds), seconds(res.SyncSeconds))
	}
	if record {
		r.runs[spec.Variant] = append(r.runs[spec.Variant], res)
		r.load = append(r.load, benchkit.LoadAverage())
	} else {
		note = " (not reported: it fills the file for the others)"
	}
	if !r.brief {
		fmt.Fprintf(r.log, "  [%s rep %d/%d] %s%s\n", benchkit.CountLabel(r.n), rep+1, r.opts.reps, summary(res), note)
	}
	return nil
}

// summary is a one-line account of a child's result.
func summary(res *childResult) string {
	s := fmt.Sprintf("%-23s informer synced %7.3fs  first List %7.3fs  all handlers synced %6.2fs (%s)  LIST %d  limit=1 %d  watch-list %d  private %4.0f MiB (RSS %4.0f)  %s",
		res.Variant, res.InformerSyncedSeconds, res.FirstListSeconds, res.SyncSeconds, secondsList(res.HandlerSyncedSeconds),
		res.Lists, res.Probes, res.WatchLists, mib(res.AnonBytes), mib(res.RSSBytes), res.Cost)
	if res.FirstWatchSeconds > 0 {
		s += fmt.Sprintf("  first watch %.3fs (synced %+.3fs after it, %d watches)", res.FirstWatchSeconds, res.InformerSyncedSeconds-res.FirstWatchSeconds, res.WatchesAtSync)
	}
	if res.CaughtUpSeconds > 0 {
		s += fmt.Sprintf("  churn applied %.2fs", res.CaughtUpSeconds)
	}
	if res.ReconcileSeconds > 0 {
		s += fmt.Sprintf("  reconciled %.2fs", res.ReconcileSeconds)
	}
	if res.StartCause != "" {
		s += fmt.Sprintf("  causes=%s rewritten=%d", strings.Join(res.Causes, ","), res.Rewritten)
	}
	if rec := res.Recovery; rec != nil {
		s += fmt.Sprintf("  recovery (%s) consistent %.2fs: %d listed in %d pages (%.2fs with the diff), %d unchanged, %d deleted, %d to fetch, %d fetched in %d requests",
			rec.Cause, rec.Seconds, rec.Listed, rec.Pages, rec.ListSeconds, rec.Unchanged, rec.Deleted, rec.ToFetch, rec.Fetched, rec.Requests)
		if res.WatchErrorSeconds > 0 {
			s += fmt.Sprintf(", began %.2fs after the first watch failed", rec.Seconds-rec.DurationSeconds-res.WatchErrorSeconds)
		}
		if rec.Count > 1 {
			s += fmt.Sprintf(" (the last of %d recoveries)", rec.Count)
		}
	}
	return s
}

// secondsList prints durations in seconds, comma-separated.
func secondsList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(s, ", ")
}

func mib[T int64 | uint64](b T) float64 { return float64(b) / (1 << 20) }
