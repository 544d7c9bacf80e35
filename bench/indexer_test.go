package bench

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

const namespaces = 50

// pods returns n realistic pods spread over 50 namespaces.
func pods(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := fixture.Pod(i)
		p.Namespace = fmt.Sprintf("ns-%02d", i%namespaces)
		out[i] = p
	}
	return out
}

var indexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// store is one implementation under test.
type store struct {
	name string
	new  func(b *testing.B) cache.Indexer
}

func clientGo() store {
	return store{"client-go", func(*testing.B) cache.Indexer {
		return cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
	}}
}

// boltinformer returns a store over a fresh file; cacheObjects bounds the
// decoded-object cache (0: unbounded).
func boltinformer(name string, cacheObjects int) store {
	return store{name, func(b *testing.B) cache.Indexer {
		db, err := persist.Open(filepath.Join(b.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, PageSize: benchPageSize})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		i, err := bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: "pods", Indexers: indexers, CacheObjects: cacheObjects})
		if err != nil {
			b.Fatal(err)
		}
		return i
	}}
}

func load(b *testing.B, s cache.Indexer, objs []*corev1.Pod) {
	list := make([]interface{}, len(objs))
	for i, o := range objs {
		list[i] = o
	}
	if err := s.Replace(list, "1"); err != nil {
		b.Fatal(err)
	}
	if i, ok := s.(*bcache.Indexer); ok {
		if err := i.Collection().Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// objects is the store size of the Get, ByIndex, List and Update
// benchmarks: BENCH_OBJECTS, default 10,000. At 100,000 the stores outgrow
// the CPU caches, as in a large cluster.
var objects = envCount("BENCH_OBJECTS", 10000)

// benchPageSize is persist.Options.PageSize of every benchmark's file:
// BENCH_PAGE_SIZE, default 0 (the package's default).
var benchPageSize = envCount("BENCH_PAGE_SIZE", 0)

// benchReads runs read for client-go's indexer and for a hot and a cold
// (100-object cache) boltinformer, each loaded with objs and read once in
// full, as a running informer's store would have been, before the timer
// starts.
func benchReads(b *testing.B, objs []*corev1.Pod, read func(b *testing.B, st cache.Indexer)) {
	for _, s := range []store{clientGo(), boltinformer("boltinformer-hot", 0), boltinformer("boltinformer-cold", 100)} {
		b.Run(s.name, func(b *testing.B) {
			st := s.new(b)
			load(b, st, objs)
			_ = st.List()
			b.ResetTimer()
			read(b, st)
		})
	}
}

// BenchmarkGet: GetByKey of random keys. "hot" serves from decoded objects
// in memory; "cold" has a 100-object cache, so almost every Get reads and
// decodes the record from the file.
func BenchmarkGet(b *testing.B) {
	objs := pods(objects)
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i], _ = cache.MetaNamespaceKeyFunc(o)
	}
	benchReads(b, objs, func(b *testing.B, st cache.Indexer) {
		rng := rand.New(rand.NewSource(1))
		for n := 0; n < b.N; n++ {
			if _, ok, err := st.GetByKey(keys[rng.Intn(len(keys))]); !ok || err != nil {
				b.Fatal("missing", err)
			}
		}
	})
}

// BenchmarkByIndex: ByIndex(namespace) returning objects/50 pods.
func BenchmarkByIndex(b *testing.B) {
	benchReads(b, pods(objects), func(b *testing.B, st cache.Indexer) {
		for n := 0; n < b.N; n++ {
			got, err := st.ByIndex(cache.NamespaceIndex, fmt.Sprintf("ns-%02d", n%namespaces))
			if err != nil || len(got) != objects/namespaces {
				b.Fatal(len(got), err)
			}
		}
	})
}

// BenchmarkList: List of all the pods.
func BenchmarkList(b *testing.B) {
	benchReads(b, pods(objects), func(b *testing.B, st cache.Indexer) {
		for n := 0; n < b.N; n++ {
			if got := st.List(); len(got) != objects {
				b.Fatal(len(got))
			}
		}
	})
}

// BenchmarkUpdate: one Update per op — what a watch event costs the store —
// including encoding and, for boltinformer, the group commits (fsync on)
// that the writes cause; the timer stops only after the last commit.
func BenchmarkUpdate(b *testing.B) {
	objs := pods(objects)
	for _, s := range []store{clientGo(), boltinformer("boltinformer", 0)} {
		b.Run(s.name, func(b *testing.B) {
			st := s.new(b)
			load(b, st, objs)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				p := objs[n%len(objs)]
				p.ResourceVersion = fmt.Sprint(1000000 + n)
				if err := st.Update(p); err != nil {
					b.Fatal(err)
				}
			}
			if i, ok := st.(*bcache.Indexer); ok {
				if err := i.Collection().Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeap loads N pods and reports the live heap afterwards, per
// object count: client-go grows with N; boltinformer with a 1,000-object
// cache stays flat.
func BenchmarkHeap(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		for _, s := range []store{clientGo(), boltinformer("boltinformer-bounded", 1000)} {
			b.Run(fmt.Sprintf("n=%d/%s", n, s.name), func(b *testing.B) {
				for it := 0; it < b.N; it++ {
					st := s.new(b)
					// Load in chunks, as a paged list would arrive, so the
					// input itself never has to be live all at once.
					for start := 0; start < n; start += 1000 {
						chunk := make([]*corev1.Pod, 1000)
						for i := range chunk {
							p := fixture.Pod(start + i)
							p.Namespace = fmt.Sprintf("ns-%02d", (start+i)%namespaces)
							chunk[i] = p
						}
						for _, p := range chunk {
							if err := st.Add(p); err != nil {
								b.Fatal(err)
							}
						}
					}
					if i, ok := st.(*bcache.Indexer); ok {
						if err := i.Collection().Flush(context.Background()); err != nil {
							b.Fatal(err)
						}
					}
					runtime.GC()
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
					runtime.KeepAlive(st)
				}
			})
		}
	}
}
