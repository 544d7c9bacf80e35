package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The recover subcommand: restarts after a downtime longer than the
// apiserver's watch history, boltinformer recovering by
// what changed beside its full-list fallback and client-go's cold starts.

// recoverVariants are the starts the subcommand measures, in the report's
// order.
var recoverVariants = []string{vBoltRecover, vBoltRecoverFull, vBolt410, vClientGoProto, vClientGoProtoList}

// recoverNames are the starts --variants takes: recoverVariants and
// bolt-recover without each of its fast paths (recoverLayerVariants).
var recoverNames = slices.Concat(recoverVariants[:1], recoverLayerVariants, recoverVariants[1:])

// recoverOptions are the recover subcommand's flags.
type recoverOptions struct {
	*benchkit.Flags // --pods, --reps and --out
	shape           podShape
	changed         []changeAmount  // --changed; nil: not in this run
	downtimes       []time.Duration // --downtimes; nil: not in this run
	rate            float64         // writes a second emulated during a downtime
	window          time.Duration   // the apiserver's watch history
	variants        []string        // --variants; nil: the mode's default
	workers         int
	logDir          string
	settle          time.Duration
	seed            uint64
	// profileDir, if set, keeps a CPU profile of every child's start.
	profileDir string
}

const (
	defaultChanged   = "0.1%,1%,10%"
	defaultDowntimes = "0,20s,60s,2m,5m,10m,30m"
)

func (o *recoverOptions) AddFlags(fs *flag.FlagSet) {
	o.settle, o.seed = 2*time.Second, 1
	o.Flags = benchkit.NewFlags(fs, 100000, 3, "informerbench")
	o.shape = shapeRealistic
	fs.Var(&o.shape, "pod-size", "Pods to create: realistic (about 6 KB of protobuf each) or small (about 2.7 KB).")
	fs.Func("changed", "Comma-separated amounts changed while no informer runs, each a point of the table: percentages of the Pods or counts, e.g. "+
		defaultChanged+" (the default, unless only --downtimes is given) or 100,1000,10k.", func(v string) (err error) {
		o.changed, err = parseChanged(v)
		return err
	})
	fs.Func("downtimes", "Comma-separated downtimes, each a point of the plot of synced time against downtime, e.g. "+defaultDowntimes+
		": --rate writes a second are emulated for each (see the package documentation).", func(v string) error {
		o.downtimes = nil
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "0" {
				s = "0s"
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("--downtimes %q: want durations such as 0,20s,2m", s)
			}
			o.downtimes = append(o.downtimes, d)
		}
		slices.Sort(o.downtimes)
		return nil
	})
	fs.Float64Var(&o.rate, "rate", 20, "Pod writes a second while the informers are down (--downtimes).")
	fs.DurationVar(&o.window, "window", 75*time.Second, "The apiserver's watch history (kube-apiserver v1.37: max(75 s, --request-timeout + 15 s)): a longer downtime is emulated with an apiserver restart, a shorter one resumes.")
	fs.Func("variants", "Comma-separated starts to measure, of "+strings.Join(recoverNames, ",")+
		" (default: "+strings.Join(recoverVariants, ",")+" with --changed; all but bolt-410 with --downtimes).", func(v string) error {
		o.variants = nil
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(recoverNames, name) {
				return fmt.Errorf("unknown variant %q: want some of %s", name, strings.Join(recoverNames, ","))
			}
			o.variants = append(o.variants, name)
		}
		return nil
	})
	fs.IntVar(&o.workers, "workers", 48, "Concurrent requests when creating and changing Pods.")
	fs.StringVar(&o.profileDir, "profile-dir", "", "Write a CPU profile of each child's start (to synced and durable) here, as <variant>-<pods>-<point>-rep<repetition>-sync.pprof.")
}

// parse reads args, printing usage and errors to usage; without --changed
// or --downtimes, the table at defaultChanged is measured.
func (o *recoverOptions) parse(args []string, usage io.Writer) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	fs.SetOutput(usage)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("recover: unexpected arguments %q", fs.Args())
	}
	if o.changed == nil && o.downtimes == nil {
		o.changed, _ = parseChanged(defaultChanged)
	}
	if o.Pods < 1 || o.Reps < 1 || o.workers < 1 || o.rate < 0 || o.window <= 0 {
		return errors.New("recover: --pods, --reps, --workers and --window must be positive, --rate not negative")
	}
	return nil
}

// variantsFor returns the starts of a mode: --variants, or the default.
func (o *recoverOptions) variantsFor(downtime bool) []string {
	if o.variants != nil {
		return o.variants
	}
	if downtime {
		return []string{vBoltRecover, vClientGoProto, vClientGoProtoList}
	}
	return recoverVariants
}

// runRecover is the recover subcommand: populate, fill boltinformer's file
// with an unmeasured cold start, then measure the plot (--downtimes) and the
// table (--changed) and save each.
func runRecover(ctx context.Context, args []string, out io.Writer) error {
	opts := &recoverOptions{}
	if err := opts.parse(args, os.Stderr); err != nil {
		return err
	}
	sess, err := openSession(ctx, &opts.logDir, []string{opts.Out, opts.profileDir}, out)
	if err != nil {
		return err
	}
	defer sess.close()
	cl, cs := sess.cl, sess.cs
	podBytes, stopHeartbeat, err := readyPods(ctx, cl, cs, opts.shape, opts.Pods, opts.workers, out)
	if err != nil {
		return err
	}
	defer stopHeartbeat()
	idleAS, idleEtcd := idleCPU(ctx, cl, 5*time.Second)
	r := &recoverRun{
		sess: sess, opts: opts, log: out, file: filepath.Join(sess.work, "cache.db"),
		pods: newPodSet(opts.Pods), rng: rand.New(rand.NewPCG(opts.seed, opts.seed^0x9e3779b97f4a7c15)),
	}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	newResult := func(mode string) *recoverResult {
		return &recoverResult{
			runHeader: runHeader{Pods: opts.Pods, Reps: opts.Reps, Date: time.Now().UTC().Format(time.RFC3339), Machine: sess.mach,
				PodSize: string(opts.shape), PodProtoBytes: podBytes, IdleAPIServerCPU: idleAS, IdleEtcdCPU: idleEtcd},
			Mode: mode, Mix: recoverMix.String(), SettleSeconds: opts.settle.Seconds(),
		}
	}
	// Downtimes first: their points within the history resume from the
	// file, which an apiserver restart since boltinformer's last start
	// would expire; beyond it, and in the changed mode, every start
	// restarts the apiserver anyway.
	if opts.downtimes != nil {
		res := newResult(modeDowntime)
		res.Rate, res.WindowSeconds = opts.rate, opts.window.Seconds()
		vs := opts.variantsFor(true)
		fmt.Fprintf(out, "measuring restarts against downtime at %d %s Pods, %.0f Pod writes/s while down, watch history %v, %d repetitions of %s…\n",
			opts.Pods, opts.shape, opts.rate, opts.window, opts.Reps, strings.Join(vs, ", "))
		for _, d := range opts.downtimes {
			writes, changed, expired := downtimeChanges(d, opts.rate, opts.window, opts.Pods)
			res.Points = append(res.Points, &recoverPoint{Label: downtimeLabel(d), DowntimeSeconds: d.Seconds(), Writes: writes, Changes: recoverMix.counts(changed), Expired: expired})
		}
		if err := r.measureAll(ctx, res, vs); err != nil {
			return err
		}
	}
	if opts.changed != nil {
		res := newResult(modeChanged)
		vs := opts.variantsFor(false)
		fmt.Fprintf(out, "measuring restarts after a downtime beyond the watch history at %d %s Pods (%.1f KB of protobuf each), %d changed amounts, %d repetitions of %s…\n",
			opts.Pods, opts.shape, podBytes/1000, len(opts.changed), opts.Reps, strings.Join(vs, ", "))
		for _, a := range opts.changed {
			res.Points = append(res.Points, &recoverPoint{Label: a.label, Changes: recoverMix.counts(a.of(opts.Pods)), Expired: true})
		}
		return r.measureAll(ctx, res, vs)
	}
	return nil
}

// recoverRun is one recover run's state: the cluster, boltinformer's file
// (which every boltinformer start shares), and the Pods that exist.
type recoverRun struct {
	sess *session
	opts *recoverOptions
	log  io.Writer
	file string
	pods *podSet
	rng  *rand.Rand
	load []float64
}

// prepare warms the watch cache up in protobuf (unmeasured: the apiserver
// memoizes each object's encoding per format) and fills boltinformer's file
// with a cold start (unmeasured).
func (r *recoverRun) prepare(ctx context.Context) error {
	warm := r.spec(vClientGoProto)
	warm.Variant = "warm-up"
	if _, err := spawn(ctx, warm, filepath.Join(r.opts.logDir, "warm-up.log")); err != nil {
		return err
	}
	cold := r.spec(vBoltCold)
	cold.Fresh = true
	res, err := spawn(ctx, cold, filepath.Join(r.opts.logDir, "fill.log"))
	if err != nil {
		return err
	}
	fmt.Fprintf(r.log, "  filled the cache file with a cold start (not reported): %s\n", summary(res))
	return nil
}

// spec is the child spec of variant v against the Pods as they are now.
func (r *recoverRun) spec(v string) childSpec {
	s := childSpec{Variant: v, Kubeconfig: r.sess.cl.kubeconfig,
		Selector: r.opts.shape.selector(), Expect: r.pods.len()}
	s.APIServerPID, s.EtcdPID = r.sess.cl.pids()
	switch v {
	case vClientGoProto, vClientGoProtoList:
		s.Informer, s.NoWatchList = informerClientGo, v == vClientGoProtoList
	default:
		s.Informer, s.File = informerBolt, r.file
	}
	return s
}

// measure runs every repetition of point p: for each, the variants in an
// order rotated by repetition and point. Before each boltinformer start the
// point's changes are made (only then: the file, which every boltinformer
// start shares, is current when a start ends, and a client-go cold start
// lists whatever is there, so changes before it would only be changes the
// next boltinformer start finds too many); before every start, if the
// point is beyond the watch history, kube-apiserver is restarted. The
// full-list fallback runs only there: within the history it would resume
// as bolt-recover does.
func (r *recoverRun) measure(ctx context.Context, p *recoverPoint, point int, variants []string) error {
	p.Runs = map[string][]*childResult{}
	history := "within the watch history: resumes"
	if p.Expired {
		history = "history expired by an apiserver restart"
	}
	fmt.Fprintf(r.log, "point %s: %d Pods changed before each boltinformer start (%s); %s\n", p.Label, p.Changes.Total(), p.Changes, history)
	for rep := range r.opts.Reps {
		for _, v := range benchkit.Rotate(variants, rep+point) {
			if (v == vBolt410 || v == vBoltRecoverFull) && !p.Expired {
				continue
			}
			spec := r.spec(v)
			if spec.Informer == informerBolt {
				plan, err := r.pods.plan(p.Changes, r.rng)
				if err != nil {
					return err
				}
				if err := applyChanges(ctx, r.sess.cs, r.opts.shape, plan, r.opts.workers, newTag("r")); err != nil {
					return err
				}
				spec.Expect, spec.NewKeys = r.pods.len(), len(plan.create)
				spec.RecoveryWithout = recoverLayers[v]
				spec.Recovery, spec.WaitRelist = v == vBoltRecover || v == vBoltRecoverFull || spec.RecoveryWithout != "", p.Expired
				spec.RecoveryFullList = v == vBoltRecoverFull
			}
			restarted := ""
			if p.Expired {
				began := time.Now()
				if err := r.sess.cl.expire(ctx); err != nil {
					return err
				}
				spec.APIServerPID, spec.EtcdPID = r.sess.cl.pids()
				restarted = fmt.Sprintf(" (after an apiserver restart of %.1fs)", time.Since(began).Seconds())
			}
			time.Sleep(r.opts.settle)
			name := fmt.Sprintf("%s-%s-%s-rep%d", v, benchkit.CountLabel(r.opts.Pods), strings.NewReplacer("%", "pct", ".", "_").Replace(p.Label), rep+1)
			if r.opts.profileDir != "" {
				spec.ProfilePrefix = filepath.Join(r.opts.profileDir, name)
			}
			res, err := spawn(ctx, spec, filepath.Join(r.opts.logDir, name+".log"))
			if err != nil {
				return err
			}
			p.Runs[v] = append(p.Runs[v], res)
			r.load = append(r.load, benchkit.LoadAverage())
			fmt.Fprintf(r.log, "  [%s rep %d/%d] %s%s\n", p.Label, rep+1, r.opts.Reps, summary(res), restarted)
		}
	}
	p.Medians = map[string]map[string]float64{}
	for v, runs := range p.Runs {
		p.Medians[v] = medians(runs)
	}
	p.Headline = headline(p.Medians)
	return nil
}

// measureAll measures every point of res, then completes res, prints it,
// and saves it in --out.
func (r *recoverRun) measureAll(ctx context.Context, res *recoverResult, variants []string) error {
	for i, p := range res.Points {
		if err := r.measure(ctx, p, i, variants); err != nil {
			return err
		}
	}
	res.LoadAvg, r.load = r.load, nil
	res.Targets = recoverTargets(res)
	if err := os.MkdirAll(r.opts.Out, 0o755); err != nil {
		return err
	}
	rep := res.report()
	if err := rep.WriteText(r.log); err != nil {
		return err
	}
	paths, err := benchkit.Save(r.opts.Out, res.name(), res, rep)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.log, "results: %s\n", strings.Join(paths, ", "))
	return nil
}

// downtimeLabel prints a downtime as the flag takes it: 0, 20s, 2m, 1h,
// 1m30s.
func downtimeLabel(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
