package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/boltinformer/boltinformer/persist"
)

// The churn subcommand: steady-state cost of both informers side by side,
// while the bench's Pods change at a steady rate (issue 20, item 3).

// churnOptions are the churn subcommand's flags.
type churnOptions struct {
	kubeconfig string
	pods       int
	shape      podShape
	rate       float64
	duration   time.Duration
	mix        churnMix
	skew       churnSkew
	inflight   int
	sample     time.Duration
	workers    int
	out        string
	logDir     string
	// batchInterval is boltinformer's group commit interval
	// (persist.Options.BatchInterval); zero is persist's default.
	batchInterval time.Duration
	// cpuProfile is a directory for each child's CPU profile of the churn
	// (churn-<informer>.pprof); empty: none.
	cpuProfile string
}

func (o *churnOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Use this cluster instead of starting a local etcd + kube-apiserver (then the apiserver's and etcd's CPU is not reported).")
	o.pods = 100000
	fs.Func("pods", "Pods to create unless they exist, e.g. 5000 or 100k (default 100k).", func(v string) (err error) {
		o.pods, err = parseCount(v)
		return err
	})
	o.shape = shapeRealistic
	fs.Var(&o.shape, "pod-size", "Pods to create: realistic (about 6 KB of protobuf each) or small (about 2.7 KB).")
	fs.Float64Var(&o.rate, "rate", 100, "Changes per second.")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "How long to churn.")
	o.mix = churnMix{80, 10, 10}
	fs.Var(&o.mix, "mix", "Weights of updates (merge patch of an annotation), creates and deletes: the default keeps the Pod count about constant.")
	fs.Var(&o.skew, "skew", "Which Pods updates pick: uniform (default), or zipf:S (S > 1, e.g. zipf:1.1), a Zipf law over the Pods ranked in a random order, so that a few Pods scattered over the key space take most updates, as in a real cluster. Deletes pick uniformly either way, and creates make new Pods (under zipf a new Pod takes a random rank).")
	fs.IntVar(&o.inflight, "inflight", 32, "Most change requests in flight at once.")
	fs.DurationVar(&o.sample, "sample", 5*time.Second, "Interval between samples of each child's /proc counters.")
	fs.IntVar(&o.workers, "workers", 48, "Concurrent requests when creating the Pods.")
	fs.StringVar(&o.out, "out", "", "Directory for churn.json, churn-samples.csv and the plots (default bench/results/churn-<pods>).")
	fs.DurationVar(&o.batchInterval, "batch-interval", 0, "boltinformer's group commit interval (persist.Options.BatchInterval); 0 is persist's default. A commit rewrites every page it touches, so fewer, larger commits write fewer bytes per event.")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "Have each child write a CPU profile of the churn, from both synced to every change seen (not the initial list), to `DIR`/churn-<informer>.pprof.")
	fs.StringVar(&o.logDir, "log-dir", "", "Keep each child's log here; by default they go to a temporary directory, and a failing child's log tail is printed.")
}

// complete fills in defaults that depend on other flags, and checks them.
func (o *churnOptions) complete() error {
	if o.pods < 1 || o.rate <= 0 || o.duration <= 0 || o.inflight < 1 || o.sample <= 0 || o.workers < 1 {
		return errors.New("--pods, --rate, --duration, --inflight, --sample and --workers must be positive")
	}
	if o.batchInterval < 0 {
		return errors.New("--batch-interval must not be negative")
	}
	if o.out == "" {
		o.out = filepath.Join("bench", "results", "churn-"+sizeLabel(o.pods))
	}
	return nil
}

// progressEvery is how often the churn prints a progress line.
const progressEvery = 30 * time.Second

// runChurn is the churn subcommand: populate, start both children, wait
// for both to sync, churn while sampling them, collect, report, save.
func runChurn(ctx context.Context, args []string, out io.Writer) error {
	o := &churnOptions{}
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.complete(); err != nil {
		return err
	}
	if o.cpuProfile != "" {
		if err := checkProfileDir(o.cpuProfile); err != nil {
			return err
		}
	}
	sess, err := openSession(ctx, o.kubeconfig, &o.logDir, []string{o.out}, out)
	if err != nil {
		return err
	}
	defer sess.close()
	work, cl, cs, mach := sess.work, sess.cl, sess.cs, sess.mach
	if err := populate(ctx, cl, o.shape, o.pods, o.workers, out); err != nil {
		return err
	}
	podBytes, err := meanPodBytes(ctx, cs, o.shape)
	if err != nil {
		return err
	}
	// Every Pod of the shape, including those an earlier churn created
	// (they are beyond --pods and are updated and deleted like the rest).
	have, err := existingPods(ctx, cl, o.shape)
	if err != nil {
		return err
	}
	live := make([]podRef, 0, len(have))
	for key := range have {
		ns, name, _ := strings.Cut(key, "/")
		live = append(live, podRef{ns, name})
	}
	slices.SortFunc(live, func(a, b podRef) int { return strings.Compare(a.ns+"/"+a.name, b.ns+"/"+b.name) })
	// Created Pods take fixture indexes from --pods up, skipping names
	// that exist: have is read-only from here on.
	var nextIndex atomic.Int64
	nextIndex.Store(int64(o.pods))
	newIndex := func() int {
		for {
			i := int(nextIndex.Add(1) - 1)
			if !have[namespaceOf(i)+"/"+o.shape.podName(i)] {
				return i
			}
		}
	}

	// No change is made from here until both children are synced, so a
	// sentAnnot at or after since is this run's.
	since := time.Now().UnixNano()
	base := churnSpec{Kubeconfig: cl.kubeconfig, Selector: o.shape.selector(), ContentType: protobufContentType,
		Since: since, ExpectEvents: int(o.rate * o.duration.Seconds())}
	var procs []*churnProc
	defer func() {
		for _, p := range procs {
			_ = p.close() // idempotent; the error paths' children end here
		}
	}()
	fmt.Fprintf(out, "starting client-go and boltinformer side by side on %d %s Pods (%.1f KB of protobuf each)…\n", len(live), o.shape, podBytes/1000)
	for _, informer := range []string{informerClientGo, informerBolt} {
		spec := base
		spec.Informer = informer
		if informer == informerBolt {
			spec.File = filepath.Join(work, "cache.db")
			spec.BatchInterval = o.batchInterval
		}
		if o.cpuProfile != "" {
			spec.CPUProfile = filepath.Join(o.cpuProfile, "churn-"+informer+".pprof")
		}
		p, err := startChurnChild(ctx, spec, filepath.Join(o.logDir, "churn-"+informer+".log"))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.waitReady(ctx, syncTimeout+persistTimeout); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "both synced; churning %.0f changes/s (update,create,delete %s; skew %s) for %v, sampling every %v…\n", o.rate, &o.mix, &o.skew, o.duration, o.sample)
	d := &churnDriver{cs: cs, shape: o.shape, mix: o.mix, pool: newPodPool(live, uint64(since), o.skew), newIndex: newIndex,
		meter: newSkewMeter(skewWindow)}
	// The children profile (--cpuprofile) from here to their results.
	for _, p := range procs {
		if err := p.start(); err != nil {
			return err
		}
	}
	cpu := startCPUMeter(cl.pids())
	loadStart := loadAverage()
	lastPrint := time.Now()
	sampler := startSampler(procs, o.sample, func(round []churnSample) {
		if time.Since(lastPrint) < progressEvery || len(round) == 0 {
			return
		}
		lastPrint = time.Now()
		var ok int64
		for k := range numOps {
			ok += d.ok[k].Load()
		}
		line := fmt.Sprintf("  %v: %d changes", seconds(round[0].T), ok)
		for _, s := range round {
			line += fmt.Sprintf("; %s %.1f CPU-s, RssAnon %.0f MiB, write_bytes %.1f MiB", s.Informer, s.CPUSeconds, mib(s.RssAnon), mib(s.WriteBytes))
		}
		fmt.Fprintln(out, line)
	})
	drive := d.run(ctx, o.rate, o.duration, o.inflight)
	used := cpu.used()
	loadEnd := loadAverage()
	if err := ctx.Err(); err != nil {
		_, _ = sampler.stop()
		return err
	}

	res := &churnResult{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: mach, PodSize: string(o.shape), PodProtoBytes: podBytes,
		PodsAtStart: len(live), DurationSeconds: o.duration.Seconds(), SampleSeconds: o.sample.Seconds(), Mix: o.mix.String(),
		Skew: o.skew.String(), ContentType: protobufContentType, Drive: drive, LoadAvgStart: loadStart, LoadAvgEnd: loadEnd,
		APIServerCPUs: used[0], EtcdCPUs: used[1], BatchInterval: cmp.Or(o.batchInterval, persist.DefaultBatchInterval).String(),
	}
	// Every child first drains (its result says whether it saw every
	// change); then the last samples; then the children exit.
	var children []*churnChildResult
	for _, p := range procs {
		c, err := p.stop(ctx, d.okCounts())
		if err != nil {
			_, _ = sampler.stop()
			return err
		}
		children = append(children, c)
	}
	samples, sampleErr := sampler.stop()
	for _, p := range procs {
		if err := p.close(); err != nil {
			return fmt.Errorf("%s child: %w; end of %s:\n%s", p.informer, err, p.logPath, tail(p.logPath, 15))
		}
	}
	if sampleErr != nil {
		return sampleErr
	}
	res.Samples = samples
	for i, p := range procs {
		res.Informers = append(res.Informers, churnInformer{Informer: p.informer, Child: children[i],
			Summary: summarize(samples, p.informer, children[i].Events)})
	}
	res.Ratios = churnRatios(res.Informers[0], res.Informers[1])

	if err := res.save(o.out); err != nil {
		return err
	}
	plots, err := writeChurnPlots(o.out, res)
	if err != nil {
		return err
	}
	printChurn(out, res)
	for _, in := range res.Informers {
		if !in.Child.Drained {
			fmt.Fprintf(out, "WARNING: %s had not seen every change (%d events for %d changes) %v after the churn's end.\n", in.Informer, in.Child.Events, drive.Succeeded, churnDrainTimeout)
		}
		if in.Child.InitialAdds != int64(len(live)) {
			fmt.Fprintf(out, "WARNING: %s synced with %d Pods, %d existed.\n", in.Informer, in.Child.InitialAdds, len(live))
		}
	}
	fmt.Fprintf(out, "results: %s, %s; plots: %s\n", filepath.Join(o.out, "churn.json"), filepath.Join(o.out, "churn-samples.csv"), strings.Join(plots, ", "))
	return nil
}

// checkProfileDir makes dir and checks that a file can be created in it, so
// that a --cpuprofile the children cannot write fails now rather than once
// the Pods are created and both children have synced.
func checkProfileDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	f, err := os.CreateTemp(dir, ".churn-*.pprof")
	if err != nil {
		return fmt.Errorf("--cpuprofile: cannot write profiles in %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
