package cache_test

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

var diffSeeds = flag.Int("indexer.seeds", 30, "seeds for TestIndexerAgreesWithClientGo")

// TestIndexerAgreesWithClientGo drives this Indexer and client-go's
// in-memory one with the same random operations. They are adds, updates,
// deletes, tombstone deletes, replaces, transactions and bookmarks. Commits
// and reopens come between them. Every read is compared after every step.
// It runs once with every object cached and once with a two-object cache
// bound. Reads are thus served from the layers, the cache and the file in
// turn.
func TestIndexerAgreesWithClientGo(t *testing.T) {
	for _, bound := range []int{0, 2} {
		for seed := 0; seed < *diffSeeds; seed++ {
			t.Run(fmt.Sprintf("cache=%d/seed=%d", bound, seed), func(t *testing.T) {
				runDifferential(t, rand.New(rand.NewSource(int64(seed))), bound, 150)
			})
		}
	}
}

// chooser makes the test's choices: a seeded PRNG, or fuzz input.
type chooser interface{ Intn(n int) int }

func runDifferential(t *testing.T, rng chooser, cacheBound, steps int) {
	indexers := cache.Indexers{
		"byApp": byLabel("app"),
		"byTier": func(obj interface{}) ([]string, error) {
			// Multi-valued, sometimes empty.
			p := obj.(*corev1.Pod)
			var out []string
			for _, k := range []string{"t1", "t2", "t3"} {
				if p.Labels[k] != "" {
					out = append(out, p.Labels[k])
				}
			}
			return out, nil
		},
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
	}
	f := newTestFile(t)
	opts := bcache.IndexerOptions{Indexers: indexers, CacheObjects: cacheBound}
	ours := f.indexer(opts)
	model := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)

	rv := 0
	randPod := func() *corev1.Pod {
		rv++
		labels := map[string]string{"app": "a" + strconv.Itoa(rng.Intn(4))}
		for _, k := range []string{"t1", "t2", "t3"} {
			if rng.Intn(2) == 0 {
				labels[k] = "tier" + strconv.Itoa(rng.Intn(3))
			}
		}
		return pod("ns"+strconv.Itoa(rng.Intn(3)), "p"+strconv.Itoa(rng.Intn(12)), strconv.Itoa(rv), labels)
	}
	existing := func() (interface{}, bool) {
		keys := model.ListKeys()
		if len(keys) == 0 {
			return nil, false
		}
		sort.Strings(keys)
		obj, _, _ := model.GetByKey(keys[rng.Intn(len(keys))])
		return obj, true
	}

	for step := 0; step < steps; step++ {
		var desc string
		both := func(fn func(s cache.Indexer) error) {
			errM, errO := fn(model), fn(ours)
			if (errM == nil) != (errO == nil) {
				t.Fatalf("step %d %s: client-go err %v, ours %v", step, desc, errM, errO)
			}
		}
		switch op := rng.Intn(100); {
		case op < 35:
			p := randPod()
			desc = "add " + p.Name
			both(func(s cache.Indexer) error { return s.Add(p) })
		case op < 55:
			if old, ok := existing(); ok {
				p := randPod()
				p.Namespace, p.Name = old.(*corev1.Pod).Namespace, old.(*corev1.Pod).Name
				desc = "update " + p.Name
				both(func(s cache.Indexer) error { return s.Update(p) })
			}
		case op < 70:
			if old, ok := existing(); ok {
				rv++
				p := old.(*corev1.Pod).DeepCopy()
				p.ResourceVersion = strconv.Itoa(rv)
				desc = "delete " + p.Name
				both(func(s cache.Indexer) error { return s.Delete(p) })
			}
		case op < 75:
			if old, ok := existing(); ok {
				key, _ := cache.MetaNamespaceKeyFunc(old)
				desc = "tombstone " + key
				both(func(s cache.Indexer) error {
					return s.Delete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
				})
			}
		case op < 82:
			// Replace with a mix of kept (same pointer and RV), changed and new objects.
			var list []interface{}
			for _, obj := range model.List() {
				switch rng.Intn(3) {
				case 0:
					list = append(list, obj)
				case 1:
					p := randPod()
					p.Namespace, p.Name = obj.(*corev1.Pod).Namespace, obj.(*corev1.Pod).Name
					list = append(list, p)
				}
			}
			for n := rng.Intn(4); n > 0; n-- {
				list = append(list, randPod())
			}
			list = dedupe(list)
			rv++
			desc = fmt.Sprintf("replace %d", len(list))
			replaceRV := strconv.Itoa(rv)
			both(func(s cache.Indexer) error { return s.Replace(append([]interface{}(nil), list...), replaceRV) })
		case op < 88:
			var txns []cache.Transaction
			for n := 1 + rng.Intn(4); n > 0; n-- {
				if old, ok := existing(); ok && rng.Intn(3) == 0 {
					txns = append(txns, cache.Transaction{Type: cache.TransactionTypeDelete, Object: old})
				} else {
					txns = append(txns, cache.Transaction{Type: cache.TransactionTypeUpdate, Object: randPod()})
				}
			}
			desc = fmt.Sprintf("transaction %d", len(txns))
			errM := model.(cache.TransactionStore).Transaction(txns...)
			errO := ours.Transaction(txns...)
			if (errM == nil) != (errO == nil) {
				t.Fatalf("step %d %s: client-go %v, ours %v", step, desc, errM, errO)
			}
		case op < 91:
			rv++
			desc = "bookmark"
			model.Bookmark(strconv.Itoa(rv))
			ours.Bookmark(strconv.Itoa(rv))
		case op < 96:
			desc = "flush"
			f.flush()
		default:
			desc = "reopen"
			f.reopen()
			ours = f.indexer(opts)
		}
		compareIndexers(t, fmt.Sprintf("step %d (%s)", step, desc), model, ours)
	}
}

func dedupe(list []interface{}) []interface{} {
	seen := map[string]int{}
	var out []interface{}
	for _, obj := range list {
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		if n, ok := seen[key]; ok {
			out[n] = obj
			continue
		}
		seen[key] = len(out)
		out = append(out, obj)
	}
	return out
}

// snapshotOf renders a list of pods as sorted key@rv strings.
func snapshotOf(objs []interface{}) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		p := o.(*corev1.Pod)
		out = append(out, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion+fmt.Sprint(p.Labels))
	}
	sort.Strings(out)
	return out
}

func compareIndexers(t *testing.T, where string, model cache.Indexer, ours *bcache.Indexer) {
	t.Helper()
	if a, b := snapshotOf(model.List()), snapshotOf(ours.List()); !eq(a, b) {
		t.Fatalf("%s: List differs\nclient-go: %v\nours:      %v", where, a, b)
	}
	if a, b := model.ListKeys(), ours.ListKeys(); !eq(a, b) {
		t.Fatalf("%s: ListKeys differs: %v vs %v", where, a, b)
	}
	if a, b := model.LastStoreSyncResourceVersion(), ours.LastStoreSyncResourceVersion(); a != b {
		t.Fatalf("%s: RV %q vs %q", where, a, b)
	}
	for _, key := range model.ListKeys() {
		a, _, _ := model.GetByKey(key)
		b, ok, err := ours.GetByKey(key)
		if !ok || err != nil || snapshotOf([]interface{}{a})[0] != snapshotOf([]interface{}{b})[0] {
			t.Fatalf("%s: GetByKey(%s) = %v %v %v, want %v", where, key, b, ok, err, a)
		}
	}
	if _, ok, _ := ours.GetByKey("ns9/absent"); ok {
		t.Fatalf("%s: absent key found", where)
	}
	for name := range model.GetIndexers() {
		values := model.ListIndexFuncValues(name)
		if got := ours.ListIndexFuncValues(name); !eq(values, got) {
			t.Fatalf("%s: ListIndexFuncValues(%s) = %v, want %v", where, name, got, values)
		}
		for _, v := range append(values, "never-indexed") {
			a, _ := model.IndexKeys(name, v)
			b, err := ours.IndexKeys(name, v)
			if err != nil || !eq(a, b) {
				t.Fatalf("%s: IndexKeys(%s, %s) = %v %v, want %v", where, name, v, b, err, a)
			}
			ao, _ := model.ByIndex(name, v)
			bo, err := ours.ByIndex(name, v)
			if err != nil || !eq(snapshotOf(ao), snapshotOf(bo)) {
				t.Fatalf("%s: ByIndex(%s, %s) = %v %v, want %v", where, name, v, snapshotOf(bo), err, snapshotOf(ao))
			}
		}
	}
}

// FuzzIndexerAgainstClientGo drives the same comparison with the fuzzer's
// bytes as the choices: every operation sequence it finds must leave this
// Indexer and client-go's reading the same. `go test` runs the seed corpus;
// `make fuzz` explores.
func FuzzIndexerAgainstClientGo(f *testing.F) {
	f.Add([]byte{0, 40, 60, 72, 80, 86, 90, 95, 99, 3, 7, 11})
	f.Add([]byte("replace, reopen and flush in every order"))
	f.Fuzz(func(t *testing.T, choices []byte) {
		if len(choices) > 4096 {
			return
		}
		c := &byteChooser{data: choices}
		runDifferential(t, c, int(c.Intn(3)), len(choices)/2+1)
	})
}

// byteChooser reads choices from fuzz input; past its end it answers 0.
type byteChooser struct {
	data []byte
	i    int
}

func (b *byteChooser) Intn(n int) int {
	if b.i >= len(b.data) {
		return 0
	}
	v := int(b.data[b.i])
	b.i++
	return v % n
}
