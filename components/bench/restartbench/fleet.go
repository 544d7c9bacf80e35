package main

// The apiserver-restart scenario: kube-scheduler and kube-controller-manager
// run together (both stock, or both on boltinformer, or none: the
// baseline); once both work, kube-apiserver restarts with etcd kept, so
// every informer finds its resourceVersion expired (410) at once.
//
// Measured from /readyz OK, since the apiserver's own start varies with the
// machine's load far more than the components' recovery does:
//   - working: each component acts on an object created then;
//   - relisted: each component's last reflector logged "Caches populated",
//     or "Recovered" where it recovered instead (--vmodule makes them log
//     it). A reflector whose resourceVersion the new watch cache still
//     serves resumes without a 410 and never relists, so the wait ends
//     once all have, or none has for 10 s after the window;
//   - the new apiserver's peak RSS, peak sampled RssAnon, CPU-seconds, LIST
//     requests and encoded bytes, read --window after the restart or at the
//     last relist.
//
// The Nodes get kubelet-like Lease renewals (nodeLeases): without them the
// node lifecycle controller would taint every Node within minutes.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
)

// fleetResult is one apiserver restart under one variant.
type fleetResult struct {
	Variant      string
	Rep          int
	Stopping     time.Duration                  // stop → the new kube-apiserver started
	Restart      time.Duration                  // stop → /readyz OK
	Working      [2]time.Duration               // /readyz OK → scheduler, controller manager working
	Relisted     [2]time.Duration               // /readyz OK → each component's last reflector relisted (may be < 0)
	Reflectors   [2]struct{ Relisted, All int } // per component
	Recovered    [2]int                         // of reflectors' relisted, how many recovered instead
	Window       time.Duration                  // stop → the readings below
	PeakRSS      uint64                         // the new apiserver's VmHWM
	PeakAnon     uint64                         // its largest sampled RssAnon
	APIServerCPU float64                        // its CPU-seconds
	Lists        float64                        // its LIST requests
	Bytes        float64                        // its LIST response and watch event bytes
}

// durations are the times in the report's columns, in their order.
func (r fleetResult) durations() [6]time.Duration {
	return [6]time.Duration{r.Stopping, r.Restart, r.Working[0], r.Working[1], r.Relisted[0], r.Relisted[1]}
}

func (r fleetResult) String() string {
	return fmt.Sprintf("%s #%d: stopping %.2f s, restart %.2f s, working %.2f / %.2f s, relisted %.2f / %.2f s (%d/%d, %d/%d reflectors; %d, %d of them recovered), window %.0f s, peak RSS %.0f MiB, RssAnon %.0f MiB, %.2f CPU-s, %.0f LISTs, %.1f MiB listed+watched",
		r.Variant, r.Rep, r.Stopping.Seconds(), r.Restart.Seconds(), r.Working[0].Seconds(), r.Working[1].Seconds(), r.Relisted[0].Seconds(), r.Relisted[1].Seconds(),
		r.Reflectors[0].Relisted, r.Reflectors[0].All, r.Reflectors[1].Relisted, r.Reflectors[1].All, r.Recovered[0], r.Recovered[1],
		r.Window.Seconds(), float64(r.PeakRSS)/(1<<20), float64(r.PeakAnon)/(1<<20), r.APIServerCPU, r.Lists, r.Bytes/(1<<20))
}

// fleetComponents are the pair, in the order of fleetResult's arrays.
var fleetComponents = [2]component{schedulerComponent, controllerManagerComponent}

// fleetArgs: the components' own flags plus the reflectors' lines (see the
// file comment).
var fleetArgs = []string{"--vmodule=reflector=3,recover=2,recoverforward=2"}

// runFleet populates the cluster for both components, then restarts the
// apiserver reps times under each variant, rotating the order.
func (b *bench) runFleet(ctx context.Context, bins map[string]component, pods, reps int, window time.Duration) ([]fleetResult, error) {
	start := time.Now()
	var pair [2]component
	for i, c := range fleetComponents {
		pair[i] = bins[c.name]
		if err := c.populate(ctx, b, pods); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	log.Printf("populated in %v", time.Since(start).Round(time.Second))
	stopLeases, err := b.nodeLeases(ctx)
	if err != nil {
		return nil, err
	}
	defer stopLeases()
	// The stock controller manager makes the Deployments' ReplicaSets and
	// Pods first, so that every restart finds the same cluster.
	start = time.Now()
	kcm := pair[1]
	p, err := startProcess(kcm.stock, filepath.Join(b.logs, kcm.name+"-fleet-priming.log"), kcm.args(b))
	if err != nil {
		return nil, err
	}
	err = b.settled(ctx, pods)
	p.Stop(stopGrace)
	if err != nil {
		return nil, err
	}
	log.Printf("%s made the Deployments' Pods in %v", kcm.name, time.Since(start).Round(time.Second))
	var results []fleetResult
	for rep := 1; rep <= reps; rep++ {
		for _, v := range benchkit.Rotate([]string{"none", "stock", "boltinformer"}, rep-1) {
			r, err := b.fleetRestart(ctx, pair, v, rep, window)
			if err != nil {
				return nil, fmt.Errorf("%s #%d: %w", v, rep, err)
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// fleetRestart starts the pair of variant (none for "none"), waits until both
// work, restarts the apiserver and measures the recovery.
func (b *bench) fleetRestart(ctx context.Context, pair [2]component, variant string, rep int, window time.Duration) (fleetResult, error) {
	r := fleetResult{Variant: variant, Rep: rep}
	id := fmt.Sprintf("fleet-%s-%d", variant, rep)
	var procs [2]*benchkit.Child
	var logs [2]string
	if variant != "none" {
		for i, c := range pair {
			bin, args := c.stock, append(c.args(b), fleetArgs...)
			if variant == "boltinformer" {
				bin = c.bolt
				args = append(args, "--boltinformer-cache-file="+filepath.Join(b.dir, c.name+".db"))
			}
			logs[i] = filepath.Join(b.logs, c.name+"-"+id+".log")
			p, err := startProcess(bin, logs[i], args)
			if err != nil {
				return r, err
			}
			defer p.Stop(stopGrace)
			procs[i] = p
		}
		if _, err := b.probes(ctx, pair[:], procs[:], logs[:], id+"-before"); err != nil {
			return r, err
		}
		// Informers start late too (the garbage collector's and the quota
		// controller's, once discovery has run): wait until no new
		// reflector has started for a while.
		if err := waitQuietReflectors(ctx, logs, 10*time.Second, 3*time.Minute); err != nil {
			return r, err
		}
	}

	var before [2]reflectorLog
	for i := range logs {
		if logs[i] != "" {
			var err error
			if before[i], err = readReflectorLog(logs[i], 0); err != nil {
				return r, err
			}
		}
	}
	oldPID, _ := b.srv.PIDs()
	sampler := sampleChild("kube-apiserver", oldPID)
	defer sampler.stop()
	stopped := time.Now()
	if err := b.srv.Restart(ctx); err != nil {
		return r, err
	}
	ready := time.Now()
	r.Restart = ready.Sub(stopped)
	if t := sampler.found.Load(); t != nil {
		r.Stopping = t.Sub(stopped)
	}
	newPID, _ := b.srv.PIDs()

	// The work done after the restart, then every reflector relisted.
	if variant != "none" {
		working, err := b.probes(ctx, pair[:], procs[:], logs[:], id+"-after")
		if err != nil {
			return r, err
		}
		for i := range working {
			r.Working[i] = working[i].Sub(ready)
		}
	}
	// The apiserver's figures are read at the end of the window, and again
	// whenever a reflector relists after that, so that they are read once
	// the last has (within 250 ms).
	windowEnd := stopped.Add(window)
	var readAt time.Time
	for {
		var lastAny time.Time
		done := true
		for i := range logs {
			if logs[i] == "" {
				continue
			}
			last, relisted, recovered, all, err := relistStatus(logs[i], before[i])
			if err != nil {
				return r, err
			}
			if !last.IsZero() {
				r.Relisted[i] = last.Sub(ready)
			}
			r.Reflectors[i].Relisted, r.Reflectors[i].All, r.Recovered[i] = relisted, all, recovered
			done = done && relisted >= all
			if last.After(lastAny) {
				lastAny = last
			}
		}
		now := time.Now()
		if now.After(windowEnd) && (readAt.IsZero() || lastAny.After(readAt)) {
			readAt = now
			r.Window = now.Sub(stopped)
			r.APIServerCPU, _ = runstats.CPU(newPID)
			r.PeakRSS, _ = runstats.Status(newPID, "VmHWM")
			r.PeakAnon = sampler.peak.Load()
			var err error
			if r.Lists, r.Bytes, err = benchkit.ServerLists(ctx, b.cs); err != nil {
				return r, err
			}
		}
		// Done once every reflector has relisted, or none has for 10 s
		// after the window (one that resumed its watch never does), or
		// 5 minutes after the restart.
		if !readAt.IsZero() && (done || now.Sub(lastAny) >= 10*time.Second || now.Sub(stopped) >= 5*time.Minute) {
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	log.Printf("apiserver restart under %s", r)
	return r, nil
}

// nodeLeaseRenewal is how often nodeLeases renews each Node's Lease: the
// kubelet's default (a quarter of its 40 s lease duration).
const nodeLeaseRenewal = 10 * time.Second

// nodeLeases keeps a Lease per Node in kube-node-lease renewed, as kubelets
// do, until stop. Without them the controller manager's node lifecycle
// controller, which runs for minutes here, marks every Node unreachable
// after its grace period (50 s): it taints them, so the scheduler binds
// nothing, and evicts their Pods. Renewals fail while the apiserver is down.
func (b *bench) nodeLeases(ctx context.Context) (stop func(), err error) {
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	leases := b.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	duration := int32(40)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	// The first failure cancels gctx, and no call starts after it.
	started := 0
	for i := 0; i < len(nodes.Items) && gctx.Err() == nil; i++ {
		started++
		g.Go(func() error {
			now := metav1.NewMicroTime(time.Now())
			name := nodes.Items[i].Name
			_, err := leases.Create(gctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &duration, RenewTime: &now},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	err = benchkit.WaitStarted(g, gctx, started, len(nodes.Items))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(nodeLeaseRenewal)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var g errgroup.Group
			g.SetLimit(createWorkers)
			for i := 0; i < len(nodes.Items) && ctx.Err() == nil; i++ {
				g.Go(func() error {
					patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, time.Now().UTC().Format(metav1.RFC3339Micro))
					_, _ = leases.Patch(ctx, nodes.Items[i].Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
					return nil
				})
			}
			_ = g.Wait()
		}
	}()
	return func() { cancel(); <-done }, nil
}

// probes runs the components' probes at once (see component.probe), each
// cancelled if any process exits, and returns when each finished.
func (b *bench) probes(ctx context.Context, comps []component, procs []*benchkit.Child, logs []string, id string) ([]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	for _, p := range procs {
		go func() {
			select {
			case <-p.Exited():
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	done := make([]time.Time, len(comps))
	errs := make([]error, len(comps))
	var wg sync.WaitGroup
	for i, c := range comps {
		wg.Go(func() {
			if errs[i] = c.probe(ctx, b, id); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w (log %s)", c.name, errs[i], logs[i])
			}
			done[i] = time.Now()
		})
	}
	wg.Wait()
	return done, errors.Join(errs...)
}

// reflectorLog is what a component's log says about its reflectors: per
// reflector name and type (not unique: the metadata informers of the
// garbage collector are all *v1.PartialObjectMetadata from one call site),
// how many started and how many lists each key has had.
type reflectorLog struct {
	started  map[string]int
	populate map[string][]populated
	// recovering: per key, recoveries that logged "Recovering" and not
	// yet their "Caches populated" (which is then not a list's).
	recovering map[string]int
	size       int64 // bytes read
}

// populated is one list handed to a reflector's store: a plain "Caches
// populated", or a recovery's "Recovered".
type populated struct {
	at        time.Time
	recovered bool
}

var (
	klogHeader = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ [^\]]+\] "((?:[^"\\]|\\.)*)"(.*)$`)
	klogKV     = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// readReflectorLog reads path's reflector lines (klog's text format) from
// offset from on.
func readReflectorLog(path string, from int64) (reflectorLog, error) {
	rl := reflectorLog{started: map[string]int{}, populate: map[string][]populated{}, recovering: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return rl, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return rl, err
	}
	rl.size = from
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if err != nil { // a partial last line is read again next time
			break
		}
		rl.size += int64(len(line))
		m := klogHeader.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil || (m[2] != "Starting reflector" && m[2] != "Caches populated" && m[2] != "Recovering" && m[2] != "Recovered") {
			continue
		}
		kv := map[string]string{}
		for _, p := range klogKV.FindAllStringSubmatch(m[3], -1) {
			kv[p[1]] = p[2]
		}
		key := kv["reflector"] + " " + kv["type"]
		switch {
		case m[2] == "Starting reflector":
			rl.started[key]++
			continue
		case m[2] == "Recovering":
			rl.recovering[key]++
			continue
		case m[2] == "Caches populated" && rl.recovering[key] > 0:
			rl.recovering[key]-- // a recovery's: counted at its "Recovered"
			continue
		}
		t, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
		if err != nil {
			continue
		}
		now := time.Now()
		t = t.AddDate(now.Year(), 0, 0)
		if t.After(now.Add(time.Hour)) { // across New Year
			t = t.AddDate(-1, 0, 0)
		}
		rl.populate[key] = append(rl.populate[key], populated{at: t, recovered: m[2] == "Recovered"})
	}
	return rl, nil
}

func (rl reflectorLog) reflectors() int {
	n := 0
	for _, c := range rl.started {
		n += c
	}
	return n
}

// waitQuietReflectors waits until no component has started a reflector for
// quiet, at most limit.
func waitQuietReflectors(ctx context.Context, logs [2]string, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n := 0
		for _, path := range logs {
			rl, err := readReflectorLog(path, 0)
			if err != nil {
				return err
			}
			n += rl.reflectors()
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// relistStatus reads path for how many of the reflectors that had started
// before the restart (before: the log up to the restart) have logged
// "Caches populated" (of a list) or "Recovered" since, how many of those
// recovered, and when the last of them did (klog's timestamp).
func relistStatus(path string, before reflectorLog) (last time.Time, relisted, recovered, all int, err error) {
	since, err := readReflectorLog(path, before.size)
	if err != nil {
		return last, 0, 0, 0, err
	}
	for k, n := range before.started {
		ts := since.populate[k]
		// The key's n reflectors are relisted at its n-th list.
		all += n
		relisted += min(n, len(ts))
		for _, p := range ts[:min(n, len(ts))] {
			if p.recovered {
				recovered++
			}
		}
		if i := min(n, len(ts)) - 1; i >= 0 && ts[i].at.After(last) {
			last = ts[i].at
		}
	}
	return last, relisted, recovered, all, nil
}

// childSampler samples the private memory of a child process of this one.
type childSampler struct {
	found atomic.Pointer[time.Time] // when the child was found; nil before
	peak  atomic.Uint64             // the largest RssAnon sample
	stop  func()                    // ends the sampling and waits for it
}

// sampleChild finds this process's child named comm other than not (the
// kube-apiserver about to replace it; looked for every 10 ms), and samples
// its RssAnon every 100 ms until stop.
func sampleChild(comm string, not int) *childSampler {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := &childSampler{stop: func() { cancel(); <-done }}
	go func() {
		defer close(done)
		pid, wait := 0, 10*time.Millisecond
		for {
			if pid == 0 {
				if pid = benchkit.ChildPID(comm, not); pid != 0 {
					now := time.Now()
					s.found.Store(&now)
					wait = 100 * time.Millisecond
				}
			}
			if pid != 0 {
				anon, _ := runstats.Status(pid, "RssAnon")
				s.peak.Store(max(s.peak.Load(), anon))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return s
}

func reportFleet(results []fleetResult, pods, nodes, reps int, window time.Duration) *benchkit.Report {
	rep := &benchkit.Report{}
	rep.Printf("\nkube-apiserver restarted (etcd kept) under kube-scheduler + kube-controller-manager; %d Nodes, %d bound Pods for the scheduler, %d Pods of %d Deployments for the controller manager; medians of %d restarts; readings %v after the restart\n\n",
		nodes, pods, pods, deployments, reps, window)
	t := rep.Table("components", "stopping s", "restart s", "scheduler working s", "KCM working s", "scheduler relisted s", "KCM relisted s",
		"apiserver peak RSS MiB", "peak RssAnon MiB", "CPU-s", "× stock", "LIST requests", "MiB listed+watched", "× stock")
	order, by := benchkit.GroupBy(results, func(r fleetResult) string { return r.Variant })
	cpu := func(r fleetResult) float64 { return r.APIServerCPU }
	bytes := func(r fleetResult) float64 { return r.Bytes }
	for _, v := range order {
		med := func(f func(fleetResult) float64) float64 { return benchkit.MedianOf(by[v], f) }
		stock := func(f func(fleetResult) float64) string { return f2(med(f)/benchkit.MedianOf(by["stock"], f)) + "×" }
		row := []string{v}
		for i := range len(fleetResult{}.durations()) {
			row = append(row, f2(med(func(r fleetResult) float64 { return r.durations()[i].Seconds() })))
		}
		t.Row(append(row, fmt.Sprintf("%.0f", med(func(r fleetResult) float64 { return float64(r.PeakRSS) })/(1<<20)),
			fmt.Sprintf("%.0f", med(func(r fleetResult) float64 { return float64(r.PeakAnon) })/(1<<20)),
			f2(med(cpu)), stock(cpu), fmt.Sprintf("%.0f", med(func(r fleetResult) float64 { return r.Lists })),
			fmt.Sprintf("%.1f", med(bytes)/(1<<20)), stock(bytes))...)
	}
	rep.Printf("\nstopping, restart: from SIGTERM to the old kube-apiserver until the new one started / answered /readyz OK. From /readyz OK:\n" +
		"working: the scheduler bound a Pod / the controller manager made the ReplicaSet and Pod of a Deployment, both created at /readyz OK;\n" +
		"relisted: the last reflector of the component logged \"Caches populated\" (its list handed to the store) or, if it recovered instead,\n" +
		"\"Recovered\" (its store consistent: the fetches of what changed done) after the restart (< 0: before /readyz OK).\n" +
		"The apiserver's figures are the new process's whole life up to the end of the window: peak RSS is the kernel's VmHWM,\n" +
		"peak RssAnon the largest 100 ms sample, MiB listed+watched what it encoded for LIST responses and watch events to every client.\n" +
		"none: the same restart with no component running (the apiserver's own start, its loopback informers, the bench's probes).\n\nEach restart:\n")
	for _, r := range results {
		rep.Printf("  %s\n", r)
	}
	return rep
}
