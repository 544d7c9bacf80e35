package cache_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/poll"
)

// scrape fetches /metrics and returns the value of the sample whose line
// starts with series (name and labels), or -1 if absent.
func scrape(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func TestMetricsMoveWithTheInformer(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

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
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
		return inf, release, cancel, done
	}
	_, release, cancel, done := start()
	url := srv.URL + "/metrics"
	coll := `{collection="pods"}`

	if v := scrape(t, url, `boltinformer_informer_starts_total{cause="cold",collection="pods"}`); v != 1 {
		t.Errorf("cold starts = %v, want 1", v)
	}
	poll.Until(t, 30*time.Second, "objects gauge", func() bool { return scrape(t, url, "boltinformer_objects"+coll) == 3 })
	if err := f.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := scrape(t, url, `boltinformer_commit_changes_count{file="cache.db"}`); v < 1 {
		t.Errorf("commit count = %v, want ≥ 1", v)
	}
	if v := scrape(t, url, `boltinformer_file_bytes{file="cache.db"}`); v <= 0 {
		t.Errorf("file bytes = %v", v)
	}
	if v := scrape(t, url, "boltinformer_resource_version_lag"+coll); v != 0 {
		t.Errorf("RV lag after flush = %v, want 0", v)
	}

	// A stalled handler's backlog shows.
	for i := 0; i < 5; i++ {
		src.Modify(pod("ns", "a", "", map[string]string{"i": strconv.Itoa(i)}))
	}
	// The handler is named after the function that declares it, as client-go names handlers.
	handler := `boltinformer_pending_notifications{collection="pods",handler="github.com/boltinformer/boltinformer/cache_test.TestMetricsMoveWithTheInformer.func1"}`
	poll.Until(t, 30*time.Second, "pending notifications", func() bool { return scrape(t, url, handler) >= 3 })
	close(release)
	poll.Until(t, 30*time.Second, "backlog drained", func() bool { return scrape(t, url, handler) == 0 })
	if v := scrape(t, url, "boltinformer_decoded_cache_hits_total"+coll); v <= 0 {
		t.Errorf("cache hits = %v", v)
	}
	cancel()
	<-done

	// A restart resumes.
	f.db.Flush(context.Background())
	_, release, cancel, done = start()
	close(release)
	if v := scrape(t, url, `boltinformer_informer_starts_total{cause="resumed",collection="pods"}`); v != 1 {
		t.Errorf("resumed starts = %v, want 1", v)
	}
	// Dropping the watch counts a restart.
	before := scrape(t, url, `boltinformer_watch_restarts_total{collection="pods",outcome="normal"}`)
	src.Shutdown()
	poll.Until(t, 30*time.Second, "watch restart", func() bool {
		return scrape(t, url, `boltinformer_watch_restarts_total{collection="pods",outcome="normal"}`) > before ||
			scrape(t, url, `boltinformer_watch_restarts_total{collection="pods",outcome="error"}`) > 0
	})
	cancel()
	<-done
	if strings.Contains(scrapeAll(t, url), "boltinformer_objects{") {
		t.Error("a stopped informer's gauges are still exported")
	}
}

func scrapeAll(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
