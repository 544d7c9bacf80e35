package bench

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// BenchmarkReadRatio runs the same reads against client-go's indexer and a
// hot boltinformer indexer (unbounded cache, every object decoded) in
// alternation, in blocks of a few milliseconds, and reports each one's time
// per read and their ratio ("x-client-go"). On a machine shared with other
// jobs, load shifts between separate benchmark runs; blocks this short see
// about the same load, so the ratio holds where the absolute times do not.
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
			for n := 0; n < b.N; n += r.block {
				end := min(n+r.block, b.N)
				for i, st := range stores {
					start := time.Now()
					for k := n; k < end; k++ {
						r.read(b, st, k)
					}
					spent[i] += time.Since(start)
				}
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "client-go-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "boltinformer-ns/op")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-client-go")
		})
	}
}
