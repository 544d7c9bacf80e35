package factory

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/metrics"

	"github.com/boltinformer/boltinformer/persist"
)

// shardServer serves the kube-system namespace and Pods. A Pod list that
// carries a shardSelector returns only the Pod "in"; one without returns
// "in" and "out". Watches stay open, empty, until the client leaves. It
// records each list request's query.
type shardServer struct {
	*httptest.Server
	mu    sync.Mutex
	lists []url.Values
}

func newShardServer(t *testing.T) *shardServer {
	s := &shardServer{}
	stop := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/namespaces/kube-system":
			_ = json.NewEncoder(w).Encode(&corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "test-cluster"}})
		case r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case r.URL.Path == "/api/v1/pods":
			s.mu.Lock()
			s.lists = append(s.lists, r.URL.Query())
			s.mu.Unlock()
			list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
			pod := func(name string) corev1.Pod {
				return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: "uid-" + "name", ResourceVersion: "5"}}
			}
			list.Items = append(list.Items, pod("in"))
			if r.URL.Query().Get("shardSelector") == "" {
				list.Items = append(list.Items, pod("out"))
			}
			_ = json.NewEncoder(w).Encode(list)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(stop) })
	return s
}

func (s *shardServer) takeLists() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.lists
	s.lists = nil
	return out
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// shardTweak is a factory tweak that sets a filter besides the selectors
// (shardSelector) and a page size.
func shardTweak(o *metav1.ListOptions) {
	o.ShardSelector = "shard-a"
	o.Limit = 7
}

// The factory's tweak (WithTweakListOptions) reaches its List in full, as
// it reaches the typed client's: a shardSelector, which decides which
// objects come back, and a limit. Else the informer holds Pods outside its
// shard.
func TestWireListSendsTheTweak(t *testing.T) {
	s := newShardServer(t)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, QPS: -1, Transport: &http.Transport{DisableKeepAlives: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The ListerWatcher the factory builds for a default informer, beside
	// the typed one it wraps (factory.go, newDefaultInformer).
	typed, err := typedListWatch(cs, &corev1.Pod{}, "", shardTweak)
	if err != nil {
		t.Fatal(err)
	}
	f := &Factory{client: cs}
	f.lock.Lock()
	req := tweakedRequest("", shardTweak)
	wired := f.wireListerWatcher(typed, &corev1.Pod{}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, req)
	f.lock.Unlock()
	if _, err := cache.ToListerWatcherWithContext(typed).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "", Limit: 500}); err != nil {
		t.Fatal(err)
	}
	wantQuery := s.takeLists()
	got, err := cache.ToListerWatcherWithContext(wired).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	gotQuery := s.takeLists()
	t.Logf("typed client's List query %v; factory's %v", wantQuery, gotQuery)
	if !reflect.DeepEqual(gotQuery, wantQuery) {
		t.Errorf("the factory's List sent %v, the typed client's (with the tweak) %v", gotQuery, wantQuery)
	}
	if n := len(got.(*corev1.PodList).Items); n != 1 {
		t.Errorf("the factory's List returned %d Pods, the typed client's 1: the tweak's shardSelector was dropped", n)
	}

	// The same through the public factory: its Pod informer holds the Pod
	// outside the shard the tweak selects.
	db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	fac := NewSharedInformerFactoryWithOptions(cs, 0, db, WithTweakListOptions(shardTweak))
	lister := fac.Core().V1().Pods().Lister()
	runCtx, cancel := context.WithCancel(ctx)
	fac.Start(runCtx.Done())
	res := fac.WaitForCacheSyncWithContext(runCtx)
	pods, _ := lister.List(labels.Everything())
	cancel()
	fac.Shutdown()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	t.Logf("factory list queries: %v", s.takeLists())
	if names := podNames(pods); strings.Join(names, ",") != "in" {
		t.Errorf("the factory's Pod informer with a shardSelector tweak holds %v, want [in]", names)
	}
}

// warningRecorder records the warnings a clientset's handler receives.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// A list's warnings reach the WarningHandler of the clientset's config, as
// the typed client's List delivers them.
func TestWireListWarningsReachTheClientsHandler(t *testing.T) {
	page := encodeAs(t, fuzzedPods(1, 1), true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Warning", `299 - "deprecated list"`)
		w.Header().Set("Content-Type", page.contentType)
		_, _ = w.Write(page.body)
	}))
	defer srv.Close()
	rec := &warningRecorder{}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, WarningHandler: rec,
		Transport: &http.Transport{DisableKeepAlives: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	typed := rec.take()
	if _, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	got := rec.take()
	if !reflect.DeepEqual(got, typed) {
		t.Errorf("the clientset's WarningHandler got %q from the factory's List, %q from the typed client's", got, typed)
	}
}

// The typed client's List retries at most ten times in all, whatever made
// it retry: a Retry-After answer or a failed connection. Each Stream of the
// factory's List retries answers with Retry-After within what is left of
// those ten, but cannot count an earlier Stream's. So its retries are
// bounded, more loosely: at most 66 requests where Do sends 11.
func TestWireListRetriesAreBounded(t *testing.T) {
	s := newScriptServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if (n+1)%11 != 0 { // overloaded: come back at once
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil { // the connection fails
			conn.Close()
		}
	})
	cs := s.clientset(t)
	reset := func() int { return len(s.reset()) }
	ctx := context.Background()
	_, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	wantRequests := reset()
	c := newWireClient(cs.CoreV1().RESTClient())
	c.retryWait = 0
	_, err := c.list(ctx, "", "pods", metav1.ListOptions{}, reflect.TypeFor[*corev1.PodList](), &pageBuffer{})
	gotRequests := reset()
	t.Logf("typed: %d requests, %v; factory: %d requests, %v", wantRequests, wantErr, gotRequests, err)
	if bound := (listRetries + 1) * (listRetries + 2) / 2; err == nil || wantErr == nil || gotRequests < wantRequests || gotRequests > bound {
		t.Errorf("every answer a 429 or a dropped connection: the factory's List made %d requests (error %v), want an error within %d; the typed client's %d (error %v)",
			gotRequests, err, bound, wantRequests, wantErr)
	}
}

// latencyRecorder counts the request latencies client-go's REST client
// observes (rest_client_request_duration_seconds), by verb.
type latencyRecorder struct {
	mu    sync.Mutex
	verbs []string
}

func (l *latencyRecorder) Observe(_ context.Context, verb string, _ url.URL, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verbs = append(l.verbs, verb)
}

type sizeRecorder struct {
	mu    sync.Mutex
	sizes []float64
}

func (s *sizeRecorder) Observe(_ context.Context, _ string, _ string, size float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = append(s.sizes, size)
}

// client-go's REST client metrics observe a typed List's latency
// (rest_client_request_duration_seconds) and response size
// (rest_client_response_size_bytes). Request.Stream observes neither, so
// the factory's List observes both itself.
func TestWireListObservesClientMetrics(t *testing.T) {
	latency, size := &latencyRecorder{}, &sizeRecorder{}
	oldLatency, oldSize := metrics.RequestLatency, metrics.ResponseSize
	metrics.RequestLatency, metrics.ResponseSize = latency, size
	t.Cleanup(func() { metrics.RequestLatency, metrics.ResponseSize = oldLatency, oldSize })

	s := newListServer(t)
	cs := s.clientset(t, "")
	lw := podsListerWatcher(t, cs)
	ctx := context.Background()
	page := encodeAs(t, fuzzedPods(2, 2), true)
	s.queue(page)
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	count := func() (int, int) {
		latency.mu.Lock()
		defer latency.mu.Unlock()
		size.mu.Lock()
		defer size.mu.Unlock()
		n, m := len(latency.verbs), len(size.sizes)
		latency.verbs, size.sizes = nil, nil
		return n, m
	}
	wantLatency, wantSize := count()
	s.queue(page)
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	gotLatency, gotSize := count()
	if gotLatency != wantLatency || gotSize != wantSize {
		t.Errorf("one List observed %d latencies and %d response sizes through the factory, %d and %d through the typed client", gotLatency, gotSize, wantLatency, wantSize)
	}
}

// A list's buffer is dropped with its last page, so an informer holds
// none between lists. The reflector's catch-up read (limit=1) answers with
// a continue token it never follows, so its buffer is not kept.
func TestWireListHoldsNoBufferAfterALimitOneRead(t *testing.T) {
	s := newListServer(t)
	cs := s.clientset(t, "")
	c := newWireClient(cs.CoreV1().RESTClient())
	pods := fuzzedPods(3, 1)
	pods.Continue = "more"
	s.queue(encodeAs(t, pods, true))
	pages := &pageBuffer{}
	if _, err := c.list(context.Background(), "", "pods", metav1.ListOptions{Limit: 1}, reflect.TypeFor[*corev1.PodList](), pages); err != nil {
		t.Fatal(err)
	}
	pages.mu.Lock()
	held := cap(pages.buf)
	pages.mu.Unlock()
	if held != 0 {
		t.Errorf("after a limit=1 read that ends the list, the informer holds a %d-byte buffer", held)
	}
}
