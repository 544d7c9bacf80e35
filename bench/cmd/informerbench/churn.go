package main

import (
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

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/persist"
)

// The churn subcommand: steady-state cost of both informers side by side,
// while the bench's Pods change at a steady rate — what a controller that
// watches for days pays between restarts: CPU seconds, bytes written to
// disk and private memory over time, and event-to-handler latency.

// churnOptions are the churn subcommand's flags. The Pods are realistic,
// and the changes 80% updates (merge patch of an annotation), 10% creates
// and 10% deletes: the Pod count stays about constant. Deletes pick their
// Pod uniformly, updates by the skew.
type churnOptions struct {
	pods     int
	rate     float64
	duration time.Duration
	skew     churnSkew
	inflight int
	sample   time.Duration
	workers  int
	out      string
	logDir   string
	// bounded, if positive, adds a third child: boltinformer with a
	// decoded-object cache of this many objects.
	bounded int
	// startSample is the sampling interval of the cold starts and the
	// restarts; restartSettle how long a restart is sampled after it
	// synced (0: no restarts).
	startSample, restartSettle time.Duration
}

// setDefaults sets every option to its default, for the flags that
// change some and for the steady subcommand, which runs churns.
func (o *churnOptions) setDefaults() {
	o.pods, o.inflight, o.sample = 100000, 32, 5*time.Second
	o.startSample, o.restartSettle = 250*time.Millisecond, 15*time.Second
	o.rate, o.duration, o.workers = 100, 10*time.Minute, 48
}

func (o *churnOptions) AddFlags(fs *flag.FlagSet) {
	o.setDefaults()
	fs.Func("pods", "Pods to create unless they exist, e.g. 5000 or 100k (default 100k).", func(v string) (err error) {
		o.pods, err = benchkit.ParseCount(v)
		return err
	})
	fs.Float64Var(&o.rate, "rate", o.rate, "Changes per second.")
	fs.DurationVar(&o.duration, "duration", o.duration, "How long to churn.")
	fs.Var(&o.skew, "skew", "Which Pods updates pick: uniform (default), or zipf:S (S > 1, e.g. zipf:1.1), a Zipf law over the Pods ranked in a random order, so that a few Pods scattered over the key space take most updates. Deletes pick uniformly either way; a created Pod takes a random rank.")
	fs.IntVar(&o.workers, "workers", o.workers, "Concurrent requests when creating the Pods.")
	fs.StringVar(&o.out, "out", "", "Directory for churn.{json,txt} and the plots (default _output/bench/churn-<pods>).")
	fs.IntVar(&o.bounded, "bounded", 0, "Also run boltinformer with a decoded-object cache of this many objects (factory.PersistenceOptions.CacheObjects), on a file of its own, as a third child; 0: not.")
}

// complete fills in defaults that depend on other flags, and checks them.
func (o *churnOptions) complete() error {
	if o.pods < 1 || o.rate <= 0 || o.duration <= 0 || o.workers < 1 || o.bounded < 0 {
		return errors.New("--pods, --rate, --duration and --workers must be positive, --bounded not negative")
	}
	if o.out == "" {
		o.out = benchkit.OutDir(churnDirName(o.pods, o.skew))
	}
	return nil
}

// churnDirName names the directories of a churn at pods Pods with skew:
// its results and its cache files.
func churnDirName(pods int, skew churnSkew) string {
	return "churn-" + benchkit.CountLabel(pods) + skew.dirSuffix()
}

// progressEvery is how often the churn prints a progress line.
const progressEvery = 30 * time.Second

// runChurn is the churn subcommand: one churnSize on a session of its own.
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
	sess, err := openSession(ctx, &o.logDir, []string{o.out}, out)
	if err != nil {
		return err
	}
	defer sess.close()
	_, err = churnSize(ctx, sess, o, out)
	return err
}

// churnSize is one churn run on the session's cluster: populate to
// o.pods, start each child cold one at a time, churn while sampling them,
// time their reads, restart them, then report and save into o.out. Its
// cache files are its own (a directory per Pod count), so that a later
// run's cold start finds no file. A churn of another skew at the same
// size has directories of its own.
func churnSize(ctx context.Context, sess *session, o *churnOptions, out io.Writer) (*churnResult, error) {
	cl, cs, mach := sess.cl, sess.cs, sess.mach
	work := filepath.Join(sess.work, churnDirName(o.pods, o.skew))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	const shape = shapeRealistic
	if err := topUpPods(ctx, cl, shape, o.pods, o.workers, out); err != nil {
		return nil, err
	}
	podBytes, err := meanPodBytes(ctx, cs, shape)
	if err != nil {
		return nil, err
	}
	// The heartbeat stands for a live cluster's other writes. Without any,
	// a warm restart waits for a bookmark that never comes, and relists.
	stopHeartbeat, err := apiservertest.Heartbeat(ctx, cs, heartbeatLease)
	if err != nil {
		return nil, err
	}
	defer stopHeartbeat()
	// Every Pod of the shape, including those an earlier churn created
	// (they are updated and deleted like the rest).
	have, err := benchkit.ExistingPods(ctx, benchkit.Protobuf(cl.cfg), shape.selector())
	if err != nil {
		return nil, err
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
			if !have[namespaceOf(i)+"/"+shape.podName(i)] {
				return i
			}
		}
	}

	// No change is made from here until every child is synced, so a
	// sentAnnot at or after since is this run's.
	since := time.Now().UnixNano()
	base := churnSpec{Kubeconfig: cl.kubeconfig, Selector: shape.selector(),
		Since: since, ExpectEvents: int(o.rate * o.duration.Seconds())}
	informers := []string{informerClientGo, informerBolt}
	if o.bounded > 0 {
		informers = append(informers, informerBoltBounded)
	}
	specOf := func(informer string) churnSpec {
		spec := base
		spec.Informer = informer
		switch informer {
		case informerBolt:
			spec.File = filepath.Join(work, "cache.db")
		case informerBoltBounded:
			spec.File = filepath.Join(work, "cache-bounded.db")
			spec.CacheObjects = o.bounded
		case informerClientGoList:
			spec.ColdOnly = true
		}
		return spec
	}
	var procs []*churnProc
	defer func() {
		for _, p := range procs {
			_ = p.close() // idempotent; the error paths' children end here
		}
	}()
	// client-go with its LIST starts cold after client-go, and is closed
	// once synced: its start is compared, not its churn.
	coldOrder := slices.Insert(slices.Clone(informers), 1, informerClientGoList)
	fmt.Fprintf(out, "starting %s one at a time on %d %s Pods (%.1f KB of protobuf each), sampling each every %v until synced…\n",
		strings.Join(coldOrder, ", "), len(live), shape, podBytes/1000, o.startSample)
	var startSamples []churnSample
	readyAt := map[string]float64{} // informer -> cold start's READY, seconds from spawn
	var listStart *churnStart
	for _, informer := range coldOrder {
		spec := specOf(informer)
		p, err := startChurnChild(ctx, spec, filepath.Join(o.logDir, "churn-"+informer+".log"))
		if err != nil {
			return nil, err
		}
		smp := startSampler([]*churnProc{p}, phaseCold, o.startSample, nil)
		var child *churnChildResult
		if spec.ColdOnly {
			child, err = p.result(ctx, syncTimeout)
		} else {
			procs = append(procs, p)
			err = p.waitReady(ctx, syncTimeout+persistTimeout)
		}
		readyAt[informer] = smp.elapsed()
		got, serr := smp.stop()
		if spec.ColdOnly {
			if cerr := p.close(); cerr != nil && err == nil {
				err = fmt.Errorf("%s child: %w; end of %s:\n%s", p.informer, cerr, p.LogPath, benchkit.Tail(p.LogPath, 15))
			}
		}
		if err := errors.Join(err, serr); err != nil {
			return nil, err
		}
		startSamples = append(startSamples, got...)
		if spec.ColdOnly {
			st := startOf(got, informer, phaseCold, readyAt[informer], child)
			listStart = &st
			fmt.Fprintf(out, "  %s synced in %v; closed\n", informer, seconds(readyAt[informer]))
			continue
		}
		fmt.Fprintf(out, "  %s synced and flushed in %v\n", informer, seconds(readyAt[informer]))
	}

	fmt.Fprintf(out, "all synced; churning %.0f changes/s (update,create,delete %s; updates %s) for %v, sampling every %v…\n", o.rate, churnMix, &o.skew, o.duration, o.sample)
	d := &churnDriver{cs: cs, shape: shape, pool: newPodPool(live, uint64(since), o.skew), newIndex: newIndex, meter: newSkewMeter(skewWindow)}
	cpu := benchkit.StartCPUMeter(cl.pids())
	loadStart := benchkit.LoadAverage()
	lastPrint := time.Now()
	sampler := startSampler(procs, phaseChurn, o.sample, func(round []churnSample) {
		if time.Since(lastPrint) < progressEvery || len(round) == 0 {
			return
		}
		lastPrint = time.Now()
		ok := d.okCounts()
		line := fmt.Sprintf("  %v: %d changes", seconds(round[0].T), ok[opUpdate]+ok[opCreate]+ok[opDelete])
		for _, s := range round {
			line += fmt.Sprintf("; %s %.1f CPU-s, RssAnon %.0f MiB, write_bytes %.1f MiB", s.Informer, s.CPUSeconds, mib(s.RssAnon), mib(s.WriteBytes))
		}
		fmt.Fprintln(out, line)
	})
	drive := d.run(ctx, o.rate, o.duration, o.inflight)
	used := cpu.Used()
	loadEnd := benchkit.LoadAverage()
	if err := ctx.Err(); err != nil {
		_, _ = sampler.stop()
		return nil, err
	}

	res := &churnResult{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: mach, PodSize: string(shape), PodProtoBytes: podBytes,
		PodsAtStart: len(live), DurationSeconds: o.duration.Seconds(), SampleSeconds: o.sample.Seconds(), Mix: churnMix.String(), Skew: o.skew.String(),
		ContentType: protobufContentType, Drive: drive, LoadAvgStart: loadStart, LoadAvgEnd: loadEnd,
		APIServerCPUs: used[0], EtcdCPUs: used[1], BatchInterval: persist.DefaultBatchInterval.String(),
		StartSampleSeconds: o.startSample.Seconds(), RestartSettleSeconds: o.restartSettle.Seconds(),
		ClientGoList: listStart, Pods: o.pods, CacheObjects: o.bounded,
	}
	// Every child first drains (its result says whether it saw every
	// change); then the last samples; then the children exit.
	var children []*churnChildResult
	for _, p := range procs {
		c, err := p.stop(ctx, d.okCounts())
		if err != nil {
			_, _ = sampler.stop()
			return nil, err
		}
		children = append(children, c)
	}
	samples, sampleErr := sampler.stop()
	if sampleErr != nil {
		return nil, sampleErr
	}
	// The reads come after the last sample, one child at a time, so that
	// they are in no churn figure and no child competes with another.
	// A boltinformer child's records are read after the last sample too:
	// the walk over its file is in no churn figure.
	fmt.Fprintf(out, "timing reads of each child's cache (Get, ByIndex on %s, List), one at a time, and reading each file's records…\n", nodeNameIndex)
	for i, p := range procs {
		if children[i].Reads, err = p.reads(ctx); err != nil {
			return nil, err
		}
		if p.file == "" {
			continue
		}
		if children[i].File, err = p.fileRecords(ctx); err != nil {
			return nil, err
		}
	}
	for _, p := range procs {
		if err := p.close(); err != nil {
			return nil, fmt.Errorf("%s child: %w; end of %s:\n%s", p.informer, err, p.LogPath, benchkit.Tail(p.LogPath, 15))
		}
	}
	restarts := map[string]*churnStart{}
	if o.restartSettle > 0 {
		fmt.Fprintf(out, "restarting each child in turn (client-go cold, boltinformer warm), sampling every %v until %v after it synced…\n", o.startSample, o.restartSettle)
		for _, informer := range informers {
			got, st, err := restartChurnChild(ctx, specOf(informer), o, &procs)
			if err != nil {
				return nil, err
			}
			samples = append(samples, got...)
			restarts[informer] = st
			fmt.Fprintf(out, "  %s synced in %v; RssAnon peak %.0f MiB, %.0f MiB %v later\n", informer, seconds(st.SyncSeconds),
				mib(st.RssAnonPeak), mib(st.RssAnonEnd), o.restartSettle)
		}
	}
	res.Samples = append(startSamples, samples...)
	for i, p := range procs[:len(informers)] {
		in := churnInformer{Informer: p.informer, Child: children[i], Summary: summarize(samples, p.informer, children[i].Events),
			Cold: startOf(startSamples, p.informer, phaseCold, readyAt[p.informer], children[i]), Restart: restarts[p.informer]}
		res.Informers = append(res.Informers, in)
	}
	for i := range res.Informers[1:] {
		in := &res.Informers[i+1]
		in.Ratios = churnRatios(res.Informers[0], *in, res.ClientGoList)
	}
	res.Ratios = res.Informers[1].Ratios

	rep := churnReport(res)
	if err := rep.WriteText(out); err != nil {
		return nil, err
	}
	paths, err := benchkit.Save(o.out, "churn", res, rep)
	if err != nil {
		return nil, err
	}
	for _, in := range res.Informers {
		if !in.Child.Drained {
			fmt.Fprintf(out, "WARNING: %s had not seen every change (%d events for %d changes) %v after the churn's end.\n", in.Informer, in.Child.Events, drive.Succeeded, churnDrainTimeout)
		}
		if in.Child.InitialAdds != int64(len(live)) {
			fmt.Fprintf(out, "WARNING: %s synced with %d Pods, %d existed.\n", in.Informer, in.Child.InitialAdds, len(live))
		}
	}
	fmt.Fprintf(out, "results: %s\n", strings.Join(paths, ", "))
	return res, nil
}

// topUpPods makes at least n of shape's Pods exist, counting every Pod of
// the shape, an earlier churn's creations too. It creates the lowest
// fixture indexes that have no Pod. A churn leaves about as many Pods as
// it found, but not the same ones: filling Pods 0..n-1 again would put
// the deleted ones back beside the created ones.
func topUpPods(ctx context.Context, cl *cluster, shape podShape, n, workers int, log io.Writer) error {
	cfg := benchkit.Protobuf(cl.cfg)
	have, err := benchkit.ExistingPods(ctx, cfg, shape.selector())
	if err != nil {
		return err
	}
	todo := missingIndexes(have, n, func(i int) string { return namespaceOf(i) + "/" + shape.podName(i) })
	if len(todo) == 0 {
		fmt.Fprintf(log, "populate: %d Pods exist, %d wanted\n", len(have), n)
		return nil
	}
	// Below the last of todo every index but todo's has a Pod, so filling
	// Pods 0..last creates todo alone.
	return populate(ctx, cl, shape, todo[len(todo)-1]+1, workers, log)
}

// missingIndexes returns the lowest fixture indexes whose key (as key
// names them) is not in have, as many as have lacks of n; none if have
// holds n or more.
func missingIndexes(have map[string]bool, n int, key func(i int) string) []int {
	var todo []int
	for i := 0; len(have)+len(todo) < n; i++ {
		if !have[key(i)] {
			todo = append(todo, i)
		}
	}
	return todo
}

// restartChurnChild starts a restart child of spec (its file as the churn
// left it), samples it from spawn until o.restartSettle after its READY,
// and returns the samples and its start. The child is added to procs,
// which the caller closes on error; on success it is closed here.
func restartChurnChild(ctx context.Context, spec churnSpec, o *churnOptions, procs *[]*churnProc) ([]churnSample, *churnStart, error) {
	spec.Restart = true
	p, err := startChurnChild(ctx, spec, filepath.Join(o.logDir, "churn-restart-"+spec.Informer+".log"))
	if err != nil {
		return nil, nil, err
	}
	*procs = append(*procs, p)
	smp := startSampler([]*churnProc{p}, phaseRestart, o.startSample, nil)
	child, err := p.result(ctx, syncTimeout)
	ready := smp.elapsed()
	if err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(o.restartSettle):
		}
	}
	got, serr := smp.stop()
	if err := errors.Join(err, serr); err != nil {
		return nil, nil, err
	}
	if err := p.close(); err != nil {
		return nil, nil, fmt.Errorf("%s restart child: %w; end of %s:\n%s", p.informer, err, p.LogPath, benchkit.Tail(p.LogPath, 15))
	}
	st := startOf(got, p.informer, phaseRestart, ready, child)
	return got, &st, nil
}
