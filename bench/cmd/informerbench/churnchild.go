package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	boltcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// The churn child: one informer, built as a user builds it, watching the
// bench's Pods while the parent changes them.
//
// Protocol (one line each, on stdin and stdout):
//  1. the parent writes a churnSpec as JSON;
//  2. the child builds its factory's Pod informer, registers one
//     churnHandler, starts the factory and waits for the registration's
//     HasSynced; a boltinformer child then flushes the file, so that the
//     cold start's bulk write is not counted as churn; both return the
//     start's garbage to the OS; the child prints READY;
//  3. the parent churns, then writes the changes of each kind that
//     succeeded (update, create, delete) as a JSON array;
//  4. the child waits until its handler has seen that many adds, updates
//     carrying a new sentAnnot of this run, and deletes (or
//     churnDrainTimeout passes), flushes the file (boltinformer) and
//     prints a churnChildResult as JSON;
//  5. the child keeps running, idle, until stdin is closed, so that the
//     parent can read its /proc counters after the last event; then it
//     stops the factory and exits;
//  6. meanwhile, once the parent has taken its last sample, it may write
//     READS: the child times reads of its cache (churnreads.go) and
//     prints their readPrices as JSON, then idles again; or FILE (a
//     boltinformer child): the child reads its file's records and prints
//     a churnFile as JSON, then idles again.
//
// A restart child (churnSpec.Restart, after the churn: client-go starts
// cold again, boltinformer warm on the file the churn left) does step 1,
// then step 2 without the flush, without returning the start's garbage
// (what the parent samples then is what a user's process holds after a
// restart) and with its churnChildResult (the sync) in place of READY,
// and idles as in step 5.
//
// A cold-only child (churnSpec.ColdOnly: client-go with its LIST, whose
// start alone is compared) does steps 1 and 2 with its churnChildResult
// (the sync) in place of READY, then idles until stdin closes, and exits
// without error.
//
// Stdin closing before step 3 (the parent died) ends any other child with
// an error.

const (
	churnChildCommand = "churn-child"

	// informerBoltBounded is boltinformer's typed factory with a bounded
	// decoded-object cache (churnSpec.CacheObjects).
	informerBoltBounded = "boltinformer-bounded"
	// informerClientGoList is client-go's factory with the WatchListClient
	// gate off (watchListEnv=false in its environment): its cold start
	// LISTs, as client-go did by default before watch-list streaming.
	informerClientGoList = "client-go-list"

	// Phases of a churn run, as samples name them.
	phaseCold    = "cold"    // spawn to synced, on an empty file
	phaseChurn   = "churn"   // START to every change seen
	phaseRestart = "restart" // a restart child's spawn to the end of its settle

	// sentAnnot carries, on every Pod the churn creates or patches, the
	// wall-clock time (Unix nanoseconds) just before the request was made.
	sentAnnot = "informerbench/sent"

	// churnDrainTimeout bounds the wait for the last events after step 3.
	churnDrainTimeout = 2 * time.Minute

	// fileLine asks a drained boltinformer child for its file's records.
	fileLine = "FILE"

	// heapAllocsMetric counts every byte the Go heap ever allocated: its
	// difference over a phase is what the phase allocated, freed or not.
	heapAllocsMetric = "/gc/heap/allocs:bytes"
)

// churnSpec says what one churn child runs.
type churnSpec struct {
	Informer   string `json:"informer"` // informerClientGo or informerBolt
	Kubeconfig string `json:"kubeconfig"`
	Selector   string `json:"selector"`
	// File is boltinformer's cache file (created by the child).
	File string `json:"file,omitempty"`
	// Since (Unix nanoseconds): a sentAnnot older than this was written
	// by an earlier run and is not timed. The parent takes it before it
	// starts the children and writes nothing until both are synced.
	Since int64 `json:"since"`
	// ExpectEvents sizes the latency buffer (a hint; it grows if needed),
	// so that its growth does not show in the memory samples.
	ExpectEvents int `json:"expectEvents"`
	// CacheObjects bounds boltinformer's decoded-object cache
	// (factory.PersistenceOptions.CacheObjects); informerBoltBounded only.
	CacheObjects int `json:"cacheObjects,omitempty"`
	// Restart makes a restart child, ColdOnly a cold-only child (see the
	// protocol above).
	Restart  bool `json:"restart,omitempty"`
	ColdOnly bool `json:"coldOnly,omitempty"`
}

// churnFile is a boltinformer child's cache file after the churn: its
// size, and its collections' records as persist counts them.
type churnFile struct {
	Bytes       int64 `json:"bytes"`
	RecordBytes int64 `json:"recordBytes"`
	Objects     int   `json:"objects"`
}

// churnChildResult is what a churn child reports.
type churnChildResult struct {
	Informer    string  `json:"informer"`
	SyncSeconds float64 `json:"syncSeconds"` // construction to the handler's HasSynced
	InitialAdds int64   `json:"initialAdds"`
	// Events after sync, by kind; Events is their sum, the denominator of
	// every per-event figure. A Pod's delete is two events: the apiserver
	// first sets its deletionTimestamp (an update), then removes it.
	Adds    int64 `json:"adds"`
	Updates int64 `json:"updates"`
	Deletes int64 `json:"deletes"`
	Events  int64 `json:"events"`
	// Drained: every change the parent made had arrived (step 3's counts
	// were reached) within churnDrainTimeout.
	Drained bool `json:"drained"`
	// Event-to-handler latency, over the adds carrying a sentAnnot of
	// this run and the updates that changed it to one (Timed of them;
	// Untimed are the other adds and updates, such as a delete's
	// deletionTimestamp): handler call time minus the annotation.
	Timed        int64   `json:"timed"`
	Untimed      int64   `json:"untimed"`
	LatencyP50Ms float64 `json:"latencyP50Ms"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
	LatencyMaxMs float64 `json:"latencyMaxMs"`
	// FileBytes* (boltinformer): the cache file's size after the cold
	// start was flushed, and after the churn was.
	FileBytesStart int64 `json:"fileBytesStart,omitempty"`
	FileBytesEnd   int64 `json:"fileBytesEnd,omitempty"`
	// StartAllocBytes: Go heap bytes allocated from construction to synced
	// (heapAllocsMetric); a cold boltinformer child's include its file's
	// flush, part of its start. ChurnAllocBytes: from READY to every
	// change seen and (boltinformer) the file flushed. 0 in results from
	// before they were measured.
	StartAllocBytes uint64 `json:"startAllocBytes,omitempty"`
	ChurnAllocBytes uint64 `json:"churnAllocBytes,omitempty"`
	// File: the cache file's records after the churn (step 6's FILE),
	// which the parent fills in from the child's answer; nil if it did
	// not ask.
	File *churnFile `json:"file,omitempty"`
	// Reads: the read prices of step 6, which the parent fills in from
	// the child's answer to READS; nil if it did not ask.
	Reads *readPrices `json:"reads,omitempty"`
}

func runChurnChild(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	var spec churnSpec
	if err := readSpec(in, &spec); err != nil {
		return fmt.Errorf("churn child: %w", err)
	}
	if err := churnChild(ctx, spec, in, stdout); err != nil {
		return fmt.Errorf("churn child %s: %w", spec.Informer, err)
	}
	return nil
}

func churnChild(ctx context.Context, spec churnSpec, in *bufio.Reader, stdout io.Writer) error {
	cfg, err := loadConfig(spec.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = spec.Selector }
	start, allocStart := time.Now(), heapAllocBytes()

	// Each informer as its users build it: a generated factory's Pod
	// informer, client-go's or boltinformer's (one changed constructor, a
	// cache file with persist's defaults: group commit, fsync on).
	var f informers.SharedInformerFactory
	var db *persist.DB
	var metricsReg *prometheus.Registry
	switch spec.Informer {
	case informerClientGo, informerClientGoList:
		// The gate is read from the environment when client-go starts: a
		// LIST child without it would measure watch-list streaming.
		if list := os.Getenv(watchListEnv) == "false"; list != (spec.Informer == informerClientGoList) {
			return fmt.Errorf("%s=%q in the environment of a %s child", watchListEnv, os.Getenv(watchListEnv), spec.Informer)
		}
		f = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(tweak))
	case informerBolt, informerBoltBounded:
		if db, err = persist.Open(spec.File, persist.Options{Scheme: scheme.Scheme}); err != nil {
			return err
		}
		defer db.Close() // deferred first, so it runs after the factory's Shutdown below
		// The decoded-object cache's hits and misses, as a user reads them.
		metricsReg = prometheus.NewRegistry()
		metrics, err := boltcache.NewMetrics(metricsReg)
		if err != nil {
			return err
		}
		persistence := factory.PersistenceOptions{Metrics: metrics}
		if spec.Informer == informerBoltBounded {
			if spec.CacheObjects <= 0 {
				return fmt.Errorf("%s needs a positive cacheObjects", spec.Informer)
			}
			persistence.CacheObjects = spec.CacheObjects
		}
		f = factory.NewSharedInformerFactoryWithOptions(cs, 0, db, factory.WithTweakListOptions(tweak), factory.WithPersistence(persistence))
	default:
		return fmt.Errorf("unknown informer %q", spec.Informer)
	}
	pods := f.Core().V1().Pods()
	// Every child indexes the same way, so that the index's upkeep is in
	// every child's churn cost and its ByIndex can be timed.
	if err := pods.Informer().AddIndexers(cache.Indexers{nodeNameIndex: podNodeName, podNameIndex: podName}); err != nil {
		return err
	}
	// A boltinformer child's decoded-object cache counts its hits, which
	// tell a bounded child's cached reads from its decoded ones.
	var stats func() persist.CacheStats
	if metricsReg != nil {
		stats = func() persist.CacheStats { return cacheStatsOf(metricsReg) }
	}
	h := newChurnHandler(spec.Since, spec.ExpectEvents)
	reg, err := pods.Informer().AddEventHandler(h)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	f.StartWithContext(runCtx)
	// Shutdown waits for the informers, which stop with runCtx.
	defer func() { cancel(); f.Shutdown() }()

	syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced)
	syncCancel()
	if !synced {
		return fmt.Errorf("handler not synced after %v", syncTimeout)
	}
	res := &churnChildResult{Informer: spec.Informer, SyncSeconds: time.Since(start).Seconds(), InitialAdds: h.initialAdds.Load(),
		StartAllocBytes: heapAllocBytes() - allocStart}
	if spec.Restart { // its result at once; then idle until stdin closes
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, in)
		return nil
	}
	if db != nil {
		if res.FileBytesStart, err = flushAndSize(ctx, db, spec.File); err != nil {
			return err
		}
		res.StartAllocBytes = heapAllocBytes() - allocStart
	}
	// A cold start leaves garbage the runtime returns over minutes; both
	// children return it now, so that the memory series starts at the
	// informer's steady state rather than at the tail of its sync.
	debug.FreeOSMemory()
	if spec.ColdOnly { // its result in place of READY; then idle until stdin closes
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, in)
		return nil
	}
	allocChurn := heapAllocBytes()
	if _, err := fmt.Fprintln(stdout, readyLine); err != nil {
		return err
	}

	line, err := in.ReadString('\n')
	var want [numOps]int64 // the changes of each kind that succeeded
	if perr := json.Unmarshal([]byte(line), &want); perr != nil {
		return fmt.Errorf("waiting for the changes made: got %q (%v): %w", line, err, perr)
	}
	res.Drained = h.waitChanges(ctx, want, churnDrainTimeout)
	if db != nil {
		if res.FileBytesEnd, err = flushAndSize(ctx, db, spec.File); err != nil {
			return err
		}
	}
	res.ChurnAllocBytes = heapAllocBytes() - allocChurn
	h.fill(res)
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return err
	}
	// Idle until the parent has taken its last /proc sample and closes
	// stdin, answering READS and FILE meanwhile.
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return nil
		}
		var answer any
		switch {
		case line == readsLine+"\n":
			if answer, err = measureReads(pods.Lister(), pods.Informer().GetIndexer(), stats); err != nil {
				return err
			}
		case line == fileLine+"\n" && db != nil:
			if answer, err = fileRecords(db, spec.File); err != nil {
				return err
			}
		default:
			return fmt.Errorf("after the result: got %q, want %s or (boltinformer) %s", line, readsLine, fileLine)
		}
		if err := json.NewEncoder(stdout).Encode(answer); err != nil {
			return err
		}
	}
}

// fileRecords sums the records of db's collections (committed; the caller
// flushed) and stats its file at path.
func fileRecords(db *persist.DB, path string) (*churnFile, error) {
	infos, err := db.Collections()
	if err != nil {
		return nil, err
	}
	f := &churnFile{}
	for _, info := range infos {
		f.RecordBytes += info.Bytes
		f.Objects += info.Objects
	}
	if f.Bytes, err = fileSize(path); err != nil {
		return nil, err
	}
	return f, nil
}

// fileSize is the size of the file at path, 0 if there is none yet (a
// cold start's child creates it after its spawn).
func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// heapAllocBytes reads heapAllocsMetric: every byte this process's Go
// heap allocated so far.
func heapAllocBytes() uint64 {
	s := []metrics.Sample{{Name: heapAllocsMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// flushAndSize commits every applied change of db and returns the file's
// size.
func flushAndSize(ctx context.Context, db *persist.DB, path string) (int64, error) {
	fctx, cancel := context.WithTimeout(ctx, persistTimeout)
	defer cancel()
	if err := db.Flush(fctx); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// churnHandler counts the events it is given and times those that carry a
// sentAnnot of this run: an add with one, an update that changed it. It
// keeps no object. The informer calls it from one goroutine; the counters
// are atomic and the latencies locked because the child's main goroutine
// reads them.
type churnHandler struct {
	since int64 // Unix nanoseconds; older sentAnnots are not timed

	initialAdds, adds, updates, deletes atomic.Int64
	// timedAdds and timedUpdates are the adds and updates timed: one per
	// create and patch of this run.
	timedAdds, timedUpdates atomic.Int64
	untimed                 atomic.Int64

	mu        sync.Mutex
	latencies []float64 // milliseconds, guarded by mu
}

func newChurnHandler(since int64, expect int) *churnHandler {
	return &churnHandler{since: since, latencies: make([]float64, 0, max(expect, 0))}
}

func (h *churnHandler) OnAdd(obj interface{}, isInInitialList bool) {
	if isInInitialList {
		h.initialAdds.Add(1)
		return
	}
	now := time.Now().UnixNano()
	h.adds.Add(1)
	if h.observe(obj, nil, now) {
		h.timedAdds.Add(1)
	}
}

func (h *churnHandler) OnUpdate(oldObj, newObj interface{}) {
	now := time.Now().UnixNano()
	h.updates.Add(1)
	if h.observe(newObj, oldObj, now) {
		h.timedUpdates.Add(1)
	}
}

func (h *churnHandler) OnDelete(interface{}) { h.deletes.Add(1) }

// observe records now minus obj's sentAnnot if it is one of this run and,
// for an update, differs from old's: an update that kept the annotation
// (the deletionTimestamp a delete sets first) was not a change the driver
// stamped, and timing it would measure the time since the Pod's last one.
func (h *churnHandler) observe(obj, old interface{}, now int64) bool {
	sent, ok := sentOf(obj)
	if !ok || sent < h.since {
		h.untimed.Add(1)
		return false
	}
	if before, ok := sentOf(old); ok && before == sent {
		h.untimed.Add(1)
		return false
	}
	h.mu.Lock()
	h.latencies = append(h.latencies, float64(now-sent)/1e6)
	h.mu.Unlock()
	return true
}

func sentOf(obj interface{}) (int64, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return 0, false
	}
	sent, err := strconv.ParseInt(pod.Annotations[sentAnnot], 10, 64)
	return sent, err == nil
}

// seen reports whether the handler has seen the events of the changes in
// want: an add per create, a timed update per patch, a delete per delete.
func (h *churnHandler) seen(want [numOps]int64) bool {
	return h.timedAdds.Load() >= want[opCreate] && h.timedUpdates.Load() >= want[opUpdate] && h.deletes.Load() >= want[opDelete]
}

// waitChanges waits until the handler has seen want (see seen); false if
// timeout passed (or ctx ended) first.
func (h *churnHandler) waitChanges(ctx context.Context, want [numOps]int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !h.seen(want) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// fill copies the counts and latency percentiles into res.
func (h *churnHandler) fill(res *churnChildResult) {
	res.Adds, res.Updates, res.Deletes = h.adds.Load(), h.updates.Load(), h.deletes.Load()
	res.Events = res.Adds + res.Updates + res.Deletes
	res.Untimed = h.untimed.Load()
	h.mu.Lock()
	lat := slices.Clone(h.latencies)
	h.mu.Unlock()
	res.Timed = int64(len(lat))
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
}
