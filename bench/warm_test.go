package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// The start benchmarks time an informer from Run to HasSynced with every
// initial add delivered to a handler, without a server: client-go decodes a
// protobuf PodList (what a LIST answers) and boltinformer resumes from a
// file. The apiserver's share is measured by bench/cmd/informerbench.
// BENCH_START_PODS sets the Pod count (default 20,000).

// envCount reads a positive count from the environment, or returns def.
func envCount(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// listWatch serves a fixed list and a watch that stays silent.
type listWatch struct {
	list  func() (runtime.Object, error)
	lists atomic.Int32
}

func (lw *listWatch) List(metav1.ListOptions) (runtime.Object, error) {
	lw.lists.Add(1)
	return lw.list()
}

func (lw *listWatch) Watch(metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported makes client-go LIST instead of trying a
// watch-list stream, which this fake cannot serve.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// runUntilDelivered runs inf until want adds reached its handler.
func runUntilDelivered(b *testing.B, inf cache.SharedIndexInformer, want int) {
	var added atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) {
		if added.Add(1) == int64(want) {
			once.Do(func() { close(done) })
		}
	}}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d adds after 5m", added.Load(), want)
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("not synced")
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

func BenchmarkStart(b *testing.B) {
	n := envCount("BENCH_START_PODS", 20000)
	objs := pods(n)
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	for _, p := range objs {
		list.Items = append(list.Items, *p)
	}
	wire, err := list.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	list = nil

	b.Run("client-go", func(b *testing.B) { // LISTs a protobuf PodList
		for b.Loop() {
			lw := &listWatch{list: func() (runtime.Object, error) {
				out := &corev1.PodList{}
				return out, out.Unmarshal(wire)
			}}
			inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, indexers)
			runUntilDelivered(b, inf, n)
			b.StartTimer()
		}
	})

	// The file is filled by a cold start of the informer itself: a warm
	// start resumes only a collection stored under its own provenance.
	path := filepath.Join(b.TempDir(), "cache.db")
	func() {
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		lw := &listWatch{list: func() (runtime.Object, error) {
			out := &corev1.PodList{}
			return out, out.Unmarshal(wire)
		}}
		inf, err := bcache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, indexers, bcache.Persistence{DB: db, Collection: "pods"})
		if err != nil {
			b.Fatal(err)
		}
		runUntilDelivered(b, inf, n)
	}()
	objs = nil

	for _, v := range []struct {
		name         string
		cacheObjects int
	}{{"boltinformer-warm", 0}, {"boltinformer-warm-bounded", boundedObjects}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
				if err != nil {
					b.Fatal(err)
				}
				lw := &listWatch{list: func() (runtime.Object, error) { return &corev1.PodList{}, nil }}
				inf, err := bcache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, indexers, bcache.Persistence{DB: db, Collection: "pods", CacheObjects: v.cacheObjects})
				if err != nil {
					b.Fatal(err)
				}
				runUntilDelivered(b, inf, n)
				if lw.lists.Load() != 0 {
					b.Fatalf("warm start listed %d times", lw.lists.Load())
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// boundedObjects is the decoded-object cache of the bounded variant, as in
// bench/cmd/informerbench.
const boundedObjects = 1000
