package bench

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// BenchmarkReadRatio runs the same reads against client-go's indexer and a
// hot boltinformer indexer (unbounded cache, every object decoded) in
// alternation, in blocks of a few milliseconds, and reports each one's time
// per read and the median over blocks of their ratio ("x-client-go"). On a
// machine shared with other jobs, load shifts between separate benchmark
// runs; two adjacent blocks this short mostly see the same load (the order
// alternates), and the median drops the pairs a burst of load split.
func BenchmarkReadRatio(b *testing.B) {
	objs := pods(objects)
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i], _ = cache.MetaNamespaceKeyFunc(o)
	}
	var stores [2]cache.Indexer
	for i, s := range []store{clientGo(), boltinformer("boltinformer-hot", 0)} {
		stores[i] = s.new(b)
		load(b, stores[i], objs)
		_ = stores[i].List()
	}
	reads := []struct {
		name  string
		block int
		read  func(b *testing.B, st cache.Indexer, n int)
	}{
		{"Get", 5000, func(b *testing.B, st cache.Indexer, n int) {
			if _, ok, err := st.GetByKey(keys[rand.Intn(len(keys))]); !ok || err != nil {
				b.Fatal("missing", err)
			}
		}},
		{"ByIndex", 20, func(b *testing.B, st cache.Indexer, n int) {
			if got, err := st.ByIndex(cache.NamespaceIndex, fmt.Sprintf("ns-%02d", n%namespaces)); err != nil || len(got) != objects/namespaces {
				b.Fatal(len(got), err)
			}
		}},
		{"List", 2, func(b *testing.B, st cache.Indexer, n int) {
			if got := st.List(); len(got) != objects {
				b.Fatal(len(got))
			}
		}},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			var spent [2]time.Duration
			var ratios []float64
			for n, blk := 0, 0; n < b.N; n, blk = n+r.block, blk+1 {
				end := min(n+r.block, b.N)
				var took [2]time.Duration
				for j := range stores {
					i := j ^ blk&1 // alternate which store goes first
					start := time.Now()
					for k := n; k < end; k++ {
						r.read(b, stores[i], k)
					}
					took[i] = time.Since(start)
					spent[i] += took[i]
				}
				ratios = append(ratios, float64(took[1])/float64(took[0]))
			}
			sort.Float64s(ratios)
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "client-go-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "boltinformer-ns/op")
			b.ReportMetric(ratios[len(ratios)/2], "x-client-go")
		})
	}
}
