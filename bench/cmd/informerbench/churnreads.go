package main

import (
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
)

// The read prices of a churn child: what a controller pays to read its
// informer's cache, measured on the state the churn left, after the
// parent's last churn sample, one child at a time.

const (
	// readsLine asks a drained churn child to measure its read prices.
	readsLine = "READS"

	// nodeNameIndex indexes Pods by spec.nodeName, as kubelet-facing
	// controllers do; every child adds it before its factory starts.
	nodeNameIndex = "nodeName"

	// podNameIndex indexes Pods by name alone: one object per value, the
	// "ByIndex of a few objects" that a lookup by a unique field makes.
	podNameIndex = "podName"

	// hotReads is how many keys, and node names, the hot reads cycle over.
	hotReads = 8

	// readBudget is about how long one measurement runs: its op count is
	// chosen from the warm-up's pace so that it lasts this long, within
	// the measurement's bounds.
	readBudget = time.Second
	// warmUpBudget bounds the warm-up pass, which also gives that pace.
	warmUpBudget = 100 * time.Millisecond
	// randomKeys is how many random keys are drawn up front; the timed
	// loop cycles over them so that it times no random number generation.
	randomKeys = 1 << 16
	// readsTimeout bounds the parent's wait for a child's read prices:
	// four measurements of about readBudget, plus a List or two of every
	// Pod that may decode them all.
	readsTimeout = 5 * time.Minute
)

// podNodeName is the nodeNameIndex function, the same for every child.
func podNodeName(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("nodeName index: %T is not a Pod", obj)
	}
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// podName is the podNameIndex function, the same for every child.
func podName(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("podName index: %T is not a Pod", obj)
	}
	return []string{pod.Name}, nil
}

// readPrices is what a child's reads cost, per op, with the op counts
// timed (after a warm-up) and the objects the multi-object reads returned.
type readPrices struct {
	// HotGetNs: lister Get of the same hotReads keys in turn.
	HotGetNs  float64 `json:"hotGetNs"`
	HotGetOps int     `json:"hotGetOps"`
	// RandomGetNs: lister Get of keys drawn uniformly over every Pod
	// (for a bounded cache, mostly misses).
	RandomGetNs  float64 `json:"randomGetNs"`
	RandomGetOps int     `json:"randomGetOps"`
	// ByIndexNs: indexer ByIndex(nodeNameIndex) of hotReads node names in
	// turn; ByIndexObjects the mean objects one call returned.
	ByIndexNs      float64 `json:"byIndexNs"`
	ByIndexOps     int     `json:"byIndexOps"`
	ByIndexObjects float64 `json:"byIndexObjects"`
	// ByNameNs: indexer ByIndex(podNameIndex) of the hot keys' names in
	// turn, one object each.
	ByNameNs  float64 `json:"byNameNs"`
	ByNameOps int     `json:"byNameOps"`
	// ListMs: lister List(labels.Everything()) of every Pod, per call.
	ListMs      float64 `json:"listMs"`
	ListOps     int     `json:"listOps"`
	ListObjects int     `json:"listObjects"`
	// CacheHits: a boltinformer child's decoded-object cache hits over
	// its lookups during each measurement (warm-up included), by its ratio
	// name (rHotGet…); nil for client-go, whose cache is all. A share of
	// lookups, not of reads: persist's Get that misses looks twice.
	CacheHits map[string]float64 `json:"cacheHits,omitempty"`
	// CachedObjects: the objects that cache held after the reads; -1 where
	// unknown (client-go, and a boltinformer child, whose metrics do not
	// say).
	CachedObjects int `json:"cachedObjects"`
}

// measureReads times the reads through lister and indexer. The keys and
// node names are sorted and drawn with a fixed seed, so that children
// holding the same Pods read the same ones. stats, if not nil, reads the
// decoded-object cache's counters, to tell hits from misses.
func measureReads(lister listersv1.PodLister, indexer cache.Indexer, stats func() persist.CacheStats) (*readPrices, error) {
	keys := indexer.ListKeys()
	nodes := indexer.ListIndexFuncValues(nodeNameIndex)
	if len(keys) == 0 || len(nodes) == 0 {
		return nil, fmt.Errorf("reads: %d keys and %d node names in the cache", len(keys), len(nodes))
	}
	slices.Sort(keys)
	slices.Sort(nodes)
	type nsName struct{ ns, name string }
	split := func(key string) (nsName, error) {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		return nsName{ns, name}, err
	}
	hot, hotNodes := make([]nsName, hotReads), make([]string, hotReads)
	for i := range hotReads {
		var err error
		if hot[i], err = split(keys[i*len(keys)/hotReads]); err != nil {
			return nil, err
		}
		hotNodes[i] = nodes[i*len(nodes)/hotReads]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]nsName, randomKeys)
	for i := range random {
		var err error
		if random[i], err = split(keys[rng.IntN(len(keys))]); err != nil {
			return nil, err
		}
	}
	get := func(k nsName) error {
		_, err := lister.Pods(k.ns).Get(k.name)
		return err
	}

	p := &readPrices{CachedObjects: -1}
	// hits records the cache's hit share since the last call under name;
	// the first call (name "") only starts counting.
	var last persist.CacheStats
	hits := func(name string) {
		if stats == nil {
			return
		}
		now := stats()
		if n := (now.Hits - last.Hits) + (now.Misses - last.Misses); n > 0 && name != "" {
			if p.CacheHits == nil {
				p.CacheHits = map[string]float64{}
			}
			p.CacheHits[name] = float64(now.Hits-last.Hits) / float64(n)
		}
		last = now
	}
	hits("")
	var err error
	if p.HotGetNs, p.HotGetOps, err = timeReads(200_000, func(i int) error { return get(hot[i%hotReads]) }); err != nil {
		return nil, fmt.Errorf("hot Get: %w", err)
	}
	hits(rHotGet)
	if p.RandomGetNs, p.RandomGetOps, err = timeReads(200_000, func(i int) error { return get(random[i%randomKeys]) }); err != nil {
		return nil, fmt.Errorf("random Get: %w", err)
	}
	hits(rRandomGet)
	byIndex := func(i int) error {
		_, err := indexer.ByIndex(nodeNameIndex, hotNodes[i%hotReads])
		return err
	}
	if p.ByIndexNs, p.ByIndexOps, err = timeReads(20_000, byIndex); err != nil {
		return nil, fmt.Errorf("ByIndex: %w", err)
	}
	for _, node := range hotNodes { // one untimed pass, to count what a call returns
		objs, err := indexer.ByIndex(nodeNameIndex, node)
		if err != nil {
			return nil, err
		}
		p.ByIndexObjects += float64(len(objs)) / hotReads
	}
	hits(rByIndex)
	byName := func(i int) error {
		objs, err := indexer.ByIndex(podNameIndex, hot[i%hotReads].name)
		if err == nil && len(objs) == 0 {
			err = fmt.Errorf("no Pod named %q", hot[i%hotReads].name)
		}
		return err
	}
	if p.ByNameNs, p.ByNameOps, err = timeReads(200_000, byName); err != nil {
		return nil, fmt.Errorf("ByIndex by name: %w", err)
	}
	hits(rByName)
	list := func(int) error {
		pods, err := lister.List(labels.Everything())
		p.ListObjects = len(pods)
		return err
	}
	var listNs float64
	if listNs, p.ListOps, err = timeReads(5, list); err != nil {
		return nil, fmt.Errorf("lister List: %w", err)
	}
	hits(rList)
	if stats != nil {
		p.CachedObjects = stats().Objects
	}
	p.ListMs = listNs / 1e6
	return p, nil
}

// timeReads runs op in a warm-up pass (up to warmUpBudget or maxOps/10
// ops), then times n ops, n chosen from the warm-up's pace to last about
// readBudget, at least 1 and at most maxOps. It returns ns per timed op
// and n. A collection first leaves each measurement the same heap debt:
// none.
func timeReads(maxOps int, op func(i int) error) (nsPerOp float64, n int, err error) {
	runtime.GC()
	warm, start := 0, time.Now()
	for warm < max(1, maxOps/10) && (warm == 0 || time.Since(start) < warmUpBudget) {
		if err := op(warm); err != nil {
			return 0, 0, err
		}
		warm++
	}
	pace := float64(time.Since(start)) / float64(warm)
	n = min(maxOps, max(1, int(float64(readBudget)/max(pace, 1))))
	runtime.GC()
	start = time.Now()
	for i := range n {
		if err := op(warm + i); err != nil {
			return 0, 0, err
		}
	}
	return float64(time.Since(start)) / float64(n), n, nil
}

// cacheStatsOf sums the decoded-object cache's hit and miss counters that
// reg gathered; Objects is -1, since no metric says it.
func cacheStatsOf(reg *prometheus.Registry) persist.CacheStats {
	st := persist.CacheStats{Objects: -1}
	families, err := reg.Gather()
	if err != nil {
		return st
	}
	for _, f := range families {
		var into *uint64
		switch f.GetName() {
		case "boltinformer_decoded_cache_hits_total":
			into = &st.Hits
		case "boltinformer_decoded_cache_misses_total":
			into = &st.Misses
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			*into += uint64(m.GetCounter().GetValue())
		}
	}
	return st
}
