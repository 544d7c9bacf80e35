package persist_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// TestBatchTimerConcurrentGenerator runs seeded random schedules in
// which several goroutines apply to their own collections while another
// flushes. Timers then fire while commits run and while Flush commits stop
// them, and some applies reach the batch limit. A change applied at time t
// must be on disk by t + BatchInterval, since commits take no bubble time.
func TestBatchTimerConcurrentGenerator(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				interval := time.Duration(20+rng.Intn(500)) * time.Millisecond
				limit := 1 << 30
				if rng.Intn(2) == 0 {
					limit = 5 + rng.Intn(60)
				}
				db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: rng.Intn(2) == 0, BatchInterval: interval, BatchLimit: limit})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				const workers = 3
				var mu sync.Mutex
				logs := make([][]appliedChange, workers)
				colls := make([]*persist.Collection, workers)
				for w := range workers {
					if colls[w], err = db.Collection(fmt.Sprintf("c%d", w), persist.CollectionOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for w := range workers {
					wseed := rng.Int63()
					wg.Go(func() {
						r := rand.New(rand.NewSource(wseed))
						for rv := 1; ; rv++ {
							select {
							case <-stop:
								return
							default:
							}
							n := 1 + r.Intn(8)
							ops := make([]persist.Op, n)
							for i := range ops {
								o := cm(fmt.Sprintf("cm-%03d", r.Intn(100)), strconv.Itoa(rv))
								ops[i] = persist.Op{Key: o.Namespace + "/" + o.Name, Object: o}
							}
							mu.Lock()
							if err := colls[w].Apply(ops, strconv.Itoa(rv)); err != nil {
								mu.Unlock()
								t.Error(err)
								return
							}
							logs[w] = append(logs[w], appliedChange{time.Now(), rv})
							mu.Unlock()
							time.Sleep(time.Duration(r.Int63n(int64(interval))))
						}
					})
				}
				fseed := rng.Int63()
				wg.Go(func() {
					r := rand.New(rand.NewSource(fseed))
					for {
						select {
						case <-stop:
							return
						default:
						}
						time.Sleep(time.Duration(r.Int63n(int64(2 * interval))))
						if err := db.Flush(context.Background()); err != nil {
							t.Error(err)
							return
						}
					}
				})
				start := time.Now()
				for range 200 {
					time.Sleep(time.Duration(rng.Int63n(int64(interval / 2))))
					synctest.Wait()
					mu.Lock()
					for w, c := range colls {
						due := dueResourceVersion(logs[w], interval)
						got, err := c.CommittedResourceVersion()
						if err != nil {
							t.Fatal(err)
						}
						if n, _ := strconv.Atoi(got); n < due {
							mu.Unlock()
							close(stop)
							wg.Wait()
							t.Fatalf("at %v (interval %v, limit %d): collection %d holds resourceVersion %q on disk, want at least %d, applied %v ago or more", time.Since(start), interval, limit, w, got, due, interval)
						}
					}
					mu.Unlock()
				}
				close(stop)
				wg.Wait()
			})
		})
	}
}
