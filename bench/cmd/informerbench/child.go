package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/persist"
)

// Bounds on a child's waits; generous, since a loaded 2-core machine can
// take minutes to list 100k Pods.
const (
	syncTimeout    = 15 * time.Minute
	relistTimeout  = 5 * time.Minute
	persistTimeout = 5 * time.Minute
)

// runChild is the hidden subcommand: read a childSpec on stdin, measure one
// informer, write the childResult on stdout.
func runChild(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var spec childSpec
	if err := readSpec(bufio.NewReader(stdin), &spec); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	res, err := measure(ctx, spec)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Variant, err)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// readSpec reads the JSON line a child is started with into spec.
func readSpec(in *bufio.Reader, spec any) error {
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return fmt.Errorf("reading spec: %w", err)
	}
	if err := json.Unmarshal(line, spec); err != nil {
		return fmt.Errorf("reading spec: %w", err)
	}
	return nil
}

// measure runs the phases the spec asks for, in an order that keeps them
// from disturbing each other: sync (timed), memory (before anything else
// allocates), file size.
func measure(ctx context.Context, spec childSpec) (*childResult, error) {
	counter := &benchkit.Requests{Resource: "pods"}
	cfg, err := loadConfig(spec.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.WrapTransport = counter.Wrap
	wire := &wireCounter{}
	cfg.Dial = wire.dial
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	h := &handler{}
	res := &childResult{Variant: spec.Variant}

	stopProfile := profilePhase(spec.ProfilePrefix, "sync")
	cpu := benchkit.StartCPUMeter(spec.APIServerPID, spec.EtcdPID, os.Getpid())
	start := time.Now()
	var inf cache.SharedIndexInformer
	var bolt *boltRun
	if spec.Informer == informerBolt {
		if bolt, err = newBoltInformer(cs, spec); err != nil {
			return nil, err
		}
		defer bolt.db.Close()
		inf = bolt.informer
	} else {
		inf = newClientGoInformer(cs, spec.Selector)
	}
	q := newQueueHandler()
	defer q.queue.ShutDown()
	var regs []cache.ResourceEventHandlerRegistration
	for _, handler := range []cache.ResourceEventHandler{h, q} {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
	}
	res.ConstructSeconds = time.Since(start).Seconds()
	stop := runInformer(ctx, inf)
	defer stop() // before db.Close: deferred calls run last-in first-out
	var caught <-chan caughtUpAt
	if bolt != nil && spec.CatchUpRV != "" {
		caught = watchApplied(ctx, bolt.informer.Indexer().Collection(), spec.CatchUpRV, start, syncTimeout+relistTimeout)
	}
	times, err := timeStart(ctx, start, inf, regs, syncTimeout)
	if err != nil {
		return nil, err
	}
	if err := times.record(res, spec.Expect); err != nil {
		return nil, err
	}
	res.InitialAdds = int(h.initialAdds.Load())
	if res.InitialAdds != spec.Expect {
		return nil, fmt.Errorf("synced with %d initial adds, want %d", res.InitialAdds, spec.Expect)
	}
	if n, bad := q.queue.Len(), q.keyErrors.Load(); n < spec.Expect || n > spec.Expect+spec.NewKeys || bad != 0 {
		return nil, fmt.Errorf("second handler synced with %d keys queued (%d objects without a key), want %d (up to %d more: Pods created while it was down)",
			n, bad, spec.Expect, spec.NewKeys)
	}
	if bolt != nil {
		if err := settleBolt(ctx, bolt, spec, start, caught, res); err != nil {
			return nil, err
		}
		// After settleBolt, which waited for the watch to deliver: a start
		// synced at open reports synced before its first watch opens.
		first, n := bolt.observer.watchesBy(start.Add(times.informerSynced))
		if !first.IsZero() {
			res.FirstWatchSeconds = first.Sub(start).Seconds()
		}
		res.WatchesAtSync = n
	}
	// The start's cost to the control plane: up to synced for client-go;
	// for boltinformer up to caught up or reconciled and durable.
	used := cpu.Used()
	res.Cost = startCost{WireBytes: wire.read.Load(), BodyBytes: counter.ResourceBytes(), APIServerCPUs: used[0], EtcdCPUs: used[1],
		Lists: counter.Count(benchkit.List), Probes: counter.Count(benchkit.Probe), MetaLists: counter.Count(benchkit.MetaList), Fetches: counter.Count(benchkit.Fetch),
		MetaBodyBytes: counter.Bytes(benchkit.MetaList), FetchBodyBytes: counter.Bytes(benchkit.Fetch), ClientCPUs: used[2]}
	stopProfile() // the "sync" profile covers catching up, a relist and the flush too

	mem := benchkit.SelfMemory()
	res.RSSBytes, res.PeakRSSBytes, res.HeapBytes = mem.RSS, mem.PeakRSS, mem.Heap
	res.AnonBytes, res.FileRSSBytes = mem.RssAnon, mem.RssFile

	if spec.FileSize && bolt != nil {
		if err := measureFile(bolt, spec, inf.GetIndexer(), res); err != nil {
			return nil, err
		}
	}
	if spec.Snapshot != "" && bolt != nil {
		if err := bolt.db.SnapshotFile(ctx, spec.Snapshot); err != nil {
			return nil, err
		}
	}
	res.Lists, res.Probes = counter.Count(benchkit.List), counter.Count(benchkit.Probe)
	res.Watches, res.WatchLists = counter.Count(benchkit.Watch)+counter.Count(benchkit.WatchList), counter.Count(benchkit.WatchList)
	res.MetaLists, res.Fetches = counter.Count(benchkit.MetaList), counter.Count(benchkit.Fetch)
	if bolt != nil {
		res.Causes = bolt.observer.allCauses()
		if len(res.Causes) > 0 {
			res.StartCause = res.Causes[0]
		}
		res.Recovery = bolt.observer.recovery(start)
		res.WatchErrorSeconds = bolt.observer.firstWatchError(start)
	}
	return res, nil
}

// settleBolt waits, for a boltinformer, for what follows HasSynced: the
// changes made while it was down (CatchUpRV), the relist a 410 forces or,
// with Recovery, the recovery's end (WaitRelist), and that state reaching
// the file.
func settleBolt(ctx context.Context, bolt *boltRun, spec childSpec, start time.Time, caught <-chan caughtUpAt, res *childResult) error {
	coll := bolt.informer.Indexer().Collection()
	if caught != nil {
		c := <-caught
		if c.err != nil {
			return c.err
		}
		res.CaughtUpSeconds = c.at.Seconds()
	}
	if spec.WaitRelist && spec.Recovery {
		// Recovered comes once the store is consistent at the recovery's
		// resourceVersion (informer synced waits for it too).
		select {
		case <-bolt.observer.recovered:
		case <-time.After(relistTimeout):
			return fmt.Errorf("no recovery ended within %v of sync (starts %v, %d full LIST requests so far)",
				relistTimeout, bolt.observer.allCauses(), res.Lists)
		case <-ctx.Done():
			return ctx.Err()
		}
		res.ReconcileSeconds = bolt.observer.recovery(start).Seconds
	} else if spec.WaitRelist {
		var rv string
		select {
		case rv = <-bolt.observer.relisted:
		case <-time.After(relistTimeout):
			return fmt.Errorf("no relist after an expired resourceVersion within %v (starts %v)", relistTimeout, bolt.observer.allCauses())
		case <-ctx.Done():
			return ctx.Err()
		}
		// Listed fires once the list is queued; the store applies it after.
		if err := waitApplied(ctx, coll, rv, relistTimeout); err != nil {
			return fmt.Errorf("relist: %w", err)
		}
		res.ReconcileSeconds = time.Since(start).Seconds()
	}
	fctx, cancel := context.WithTimeout(ctx, persistTimeout)
	defer cancel()
	if err := bolt.db.Flush(fctx); err != nil {
		return err
	}
	res.DurableSeconds = time.Since(start).Seconds()
	res.Rewritten = bolt.changes.Load()
	return nil
}

// caughtUpAt is when the store applied a resourceVersion, counted from the
// start, or why it did not.
type caughtUpAt struct {
	at  time.Duration
	err error
}

// watchApplied reports, from now on, when coll's applied resourceVersion
// reaches rv: the changes made while the informer was down are applied.
func watchApplied(ctx context.Context, coll *persist.Collection, rv string, start time.Time, timeout time.Duration) <-chan caughtUpAt {
	out := make(chan caughtUpAt, 1)
	go func() {
		err := waitApplied(ctx, coll, rv, timeout)
		out <- caughtUpAt{at: time.Since(start), err: err}
	}()
	return out
}

// waitApplied waits until coll has applied resourceVersion rv. It polls
// every millisecond, so that a timed start is not rounded up.
func waitApplied(ctx context.Context, coll *persist.Collection, rv string, timeout time.Duration) error {
	want, deadline := rvNumber(rv), time.Now().Add(timeout)
	for rvNumber(coll.ResourceVersion()) < want {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("store at resourceVersion %s, not caught up with %s after %v", coll.ResourceVersion(), rv, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// profilePhase starts a CPU profile into <prefix>-<phase>.pprof and returns
// what stops it; with an empty prefix, or on error, it does nothing.
func profilePhase(prefix, phase string) (stop func()) {
	if prefix != "" {
		if stop, err := benchkit.StartProfile(prefix + "-" + phase + ".pprof"); err == nil {
			return stop
		}
	}
	return func() {}
}
