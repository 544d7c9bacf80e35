package persist_test

import (
	"context"
	"math/rand"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// BenchmarkOpenMidFoldPeakHeap measures the heap a writable open needs when
// it must change a collection whose fold has copied most of the trees.
// BENCH_OBJECTS ConfigMaps (default 100,000) of about BENCH_RECORD_BYTES
// (default 6,000) are loaded, then changed until the fold's copies hold
// nine tenths of them, and the file is closed. Each iteration opens a copy
// of that file with a new description, which makes the open write. bbolt
// holds a buffer per page a transaction writes until it commits, so an
// open that writes the copies back in one transaction needs about the
// collection's bytes. Reported:
//
//   - peak-heap-MB: the largest heap seen during the open, less the heap
//     before it, sampled every millisecond;
//   - copied-MB: the records the copies held;
//   - open-ms: how long the open took.
func BenchmarkOpenMidFoldPeakHeap(b *testing.B) {
	objects := envInt("BENCH_OBJECTS", 100000)
	size := envInt("BENCH_RECORD_BYTES", 6000)
	dir := b.TempDir()
	fixture := filepath.Join(dir, "fixture.db")
	dbOpts := persist.WithJournalBytes(persist.Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: time.Hour, BatchLimit: 1 << 30}, 4<<20)
	opts := persist.CollectionOptions{Indexes: map[string]string{"namespace": "v1", "app": "v1"}, IndexValues: churnIndexValues}
	copied := midFoldFixture(b, fixture, dbOpts, opts, objects, size)

	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		path := filepath.Join(dir, "open"+strconv.Itoa(i)+".db")
		copyFile(b, fixture, path)
		db, err := persist.Open(path, dbOpts)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.StartTimer()
		open := opts
		open.Description = map[string]string{"run": strconv.Itoa(i)}
		var c *persist.Collection
		start := time.Now()
		peak := peakHeap(func() { c, err = db.Collection("cms", open) })
		took := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if n, err := persist.FoldCopies(c); err != nil {
			b.Fatal(err)
		} else {
			b.Logf("after the open the copies hold %d records (-1: none)", n)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(copied)/(1<<20), "copied-MB")
		b.ReportMetric(float64(took.Milliseconds()), "open-ms")
		b.StartTimer()
	}
}

// midFoldFixture loads objects records of about size bytes into the
// collection cms of a new file at path, and changes them until a fold's
// copies hold nine tenths of them. It returns the bytes the copies hold.
func midFoldFixture(b *testing.B, path string, dbOpts persist.Options, opts persist.CollectionOptions, objects, size int) int64 {
	b.Helper()
	ctx := context.Background()
	db, err := persist.Open(path, dbOpts)
	if err != nil {
		b.Fatal(err)
	}
	c, err := db.Collection("cms", opts)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'a' + byte(rng.Intn(26))
	}
	ops := make([]persist.Op, objects)
	for i := range ops {
		ops[i] = churnOp(i, 1, string(pad))
	}
	if err := c.Apply(ops, "1"); err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	for step := 2; ; step++ {
		batch := make([]persist.Op, 100)
		for i := range batch {
			batch[i] = churnOp(rng.Intn(objects), step, string(pad))
		}
		if err := c.Apply(batch, strconv.Itoa(step)); err != nil {
			b.Fatal(err)
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		n, err := persist.FoldCopies(c)
		if err != nil {
			b.Fatal(err)
		}
		if n >= objects*9/10 {
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			return int64(n) * int64(size)
		}
		if step > 100000 {
			b.Fatal("no fold copied nine tenths of the records")
		}
	}
}

// peakHeap runs fn and returns the largest heap seen while it ran, less
// the heap before, sampled every millisecond.
func peakHeap(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}
