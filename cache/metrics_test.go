package cache_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// sample returns the value of one series gathered from g, or -1 if g has
// no such series. name is the metric's name, or, for a histogram's sample
// count, its name with "_count"; labels are its labels, all of them.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	family, histCount := name, false
	if base, ok := strings.CutSuffix(name, "_count"); ok {
		family, histCount = base, true
	}
	for _, mf := range mfs {
		if mf.GetName() != family && mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !sameLabels(m.GetLabel(), labels) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Histogram != nil && histCount && mf.GetName() == family:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

func TestMetricsMoveWithTheInformer(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	src := fcache.NewFakeControllerSource()
	for _, name := range []string{"a", "b", "c"} {
		src.Add(pod("ns", name, "", nil))
	}
	f := newTestFile(t)
	metrics.ObserveDB(f.db)
	start := func() (*bcache.Informer, chan struct{}, context.CancelFunc, chan struct{}) {
		inf, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
			Persistence: bcache.Persistence{DB: f.db, Collection: "pods"},
			Metrics:     metrics,
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, _ interface{}) { <-release }, // a stalled handler
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { inf.RunWithContext(ctx); close(done) }()
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		return inf, release, cancel, done
	}
	_, release, cancel, done := start()
	coll := map[string]string{"collection": "pods"}
	file := map[string]string{"file": "cache.db"}

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP boltinformer_informer_starts_total Informer starts by cause: cold (listed into an empty collection), resumed (watched from the stored resourceVersion), relist-expired (relisted after 410), relist-catchup (relisted because short watches did not catch up with the start's consistent read: the server sends no bookmarks), relist-error (relisted after another failure).
# TYPE boltinformer_informer_starts_total counter
boltinformer_informer_starts_total{cause="cold",collection="pods"} 1
`), "boltinformer_informer_starts_total"); err != nil {
		t.Errorf("after a cold start: %v", err)
	}
	poll.Until(t, 30*time.Second, "objects gauge", func() bool { return sample(t, reg, "boltinformer_objects", coll) == 3 })
	if err := f.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := sample(t, reg, "boltinformer_commit_changes_count", file); v < 1 {
		t.Errorf("commit count = %v, want ≥ 1", v)
	}
	if v := sample(t, reg, "boltinformer_file_bytes", file); v <= 0 {
		t.Errorf("file bytes = %v", v)
	}
	if v := sample(t, reg, "boltinformer_resource_version_lag", coll); v != 0 {
		t.Errorf("RV lag after flush = %v, want 0", v)
	}

	// A stalled handler's backlog shows.
	for i := 0; i < 5; i++ {
		src.Modify(pod("ns", "a", "", map[string]string{"i": strconv.Itoa(i)}))
	}
	// The handler is named after the function that declares it, as client-go names handlers.
	handler := map[string]string{"collection": "pods", "handler": "github.com/boltinformer/boltinformer/cache_test.TestMetricsMoveWithTheInformer.func1"}
	poll.Until(t, 30*time.Second, "pending notifications", func() bool { return sample(t, reg, "boltinformer_pending_notifications", handler) >= 3 })
	close(release)
	poll.Until(t, 30*time.Second, "backlog drained", func() bool { return sample(t, reg, "boltinformer_pending_notifications", handler) == 0 })
	if v := sample(t, reg, "boltinformer_decoded_cache_hits_total", coll); v <= 0 {
		t.Errorf("cache hits = %v", v)
	}
	cancel()
	<-done

	// A restart resumes.
	if err := f.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, release, cancel, done = start()
	close(release)
	if v := sample(t, reg, "boltinformer_informer_starts_total", map[string]string{"cause": "resumed", "collection": "pods"}); v != 1 {
		t.Errorf("resumed starts = %v, want 1", v)
	}
	// Dropping the watch counts a restart.
	restarts := func(outcome string) float64 {
		return sample(t, reg, "boltinformer_watch_restarts_total", map[string]string{"collection": "pods", "outcome": outcome})
	}
	before := restarts("normal")
	src.Shutdown()
	poll.Until(t, 30*time.Second, "watch restart", func() bool { return restarts("normal") > before || restarts("error") > 0 })
	cancel()
	<-done
	if n, err := testutil.GatherAndCount(reg, "boltinformer_objects"); err != nil || n != 0 {
		t.Errorf("a stopped informer's gauges are still exported: %d boltinformer_objects series (%v)", n, err)
	}
}

// A memory-only informer has no file metrics, but its handlers' backlogs
// are exported like any informer's.
func TestMetricsMemoryOnlyInformer(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFile(t)
	r := startInformerOpts(t, f, noWatchList{podSource("a")}, bcache.InformerOptions{
		Persistence: bcache.Persistence{Collection: "mem", MemoryOnly: true},
		Metrics:     metrics,
	}, nil)
	r.synced(t)
	count := func(name string) int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "collection" && l.GetValue() == "mem" {
						n++
					}
				}
			}
		}
		return n
	}
	if n := count("boltinformer_pending_notifications"); n != 1 {
		t.Errorf("%d boltinformer_pending_notifications series for the memory-only informer's handler, want 1", n)
	}
	if n := count("boltinformer_objects"); n != 0 {
		t.Errorf("a memory-only informer exports boltinformer_objects (%d series)", n)
	}
}
