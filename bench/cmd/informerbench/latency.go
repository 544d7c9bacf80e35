package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Each call kind runs up to its count of calls or until latencyBudget has
// passed (at least one call): List and ByIndex touch N and N/50 objects per
// call, which a bounded boltinformer decodes from the file, so at 100k a
// fixed count would take minutes.
const (
	latencyGets    = 20000
	latencyByIndex = 200
	latencyLists   = 5
	latencyBudget  = 3 * time.Second
)

// measureLatency times random GetByKey, ByIndex(namespace) and full List
// calls on a synced indexer, as a controller's listers make them.
func measureLatency(idx cache.Indexer) (*latencyResult, error) {
	keys := idx.ListKeys()
	if len(keys) == 0 {
		return nil, fmt.Errorf("latency: the indexer is empty")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	res := &latencyResult{}
	var err error
	res.GetNs, err = timeCalls(latencyGets, func() error {
		if _, ok, err := idx.GetByKey(keys[rng.IntN(len(keys))]); !ok || err != nil {
			return fmt.Errorf("latency: Get: found=%v, %v", ok, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	byIndexNs, err := timeCalls(latencyByIndex, func() error {
		_, err := idx.ByIndex(cache.NamespaceIndex, namespaceOf(rng.IntN(podNamespaces)))
		return err
	})
	if err != nil {
		return nil, err
	}
	listNs, err := timeCalls(latencyLists, func() error {
		if got := idx.List(); len(got) != len(keys) {
			return fmt.Errorf("latency: List returned %d objects, want %d", len(got), len(keys))
		}
		return nil
	})
	res.ByIndexUs, res.ListMs = byIndexNs/1e3, listNs/1e6
	return res, err
}

// timeCalls calls fn up to n times within latencyBudget and returns the
// mean nanoseconds per call.
func timeCalls(n int, fn func() error) (float64, error) {
	start := time.Now()
	calls := 0
	for calls < n && (calls == 0 || time.Since(start) < latencyBudget) {
		if err := fn(); err != nil {
			return 0, err
		}
		calls++
	}
	return float64(time.Since(start).Nanoseconds()) / float64(calls), nil
}
