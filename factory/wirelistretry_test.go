package factory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
)

// scriptServer answers the n-th request (from 0) since its last reset with
// answer(n, w, r). It records each request's query; reset returns them.
type scriptServer struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
}

func newScriptServer(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *scriptServer {
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.queries)
		s.queries = append(s.queries, r.URL.Query())
		s.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) reset() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.queries
	s.queries = nil
	return out
}

func (s *scriptServer) clientset(t *testing.T) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, QPS: -1, Transport: &http.Transport{DisableKeepAlives: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// retryThenPage answers every other request, from the first after a reset,
// with code and "Retry-After: 0", and the others with page.
func retryThenPage(t *testing.T, code int, page listAnswer) *scriptServer {
	return newScriptServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 0 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, http.StatusText(code), code)
			return
		}
		w.Header().Set("Content-Type", page.contentType)
		_, _ = w.Write(page.body)
	})
}

// A 429 without a Retry-After header is not retried by Request.Do: its
// checkWait needs the header. Nor by the factory's List, which would else
// retry ten times at once against a server asking it to slow down.
func TestWireList429WithoutRetryAfterIsNotRetried(t *testing.T) {
	s := newScriptServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	cs := s.clientset(t)
	ctx := context.Background()
	_, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	want := len(s.reset())
	_, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{})
	got := len(s.reset())
	t.Logf("typed: %d requests, %v; factory: %d requests, %v", want, wantErr, got, err)
	if got != want {
		t.Errorf("a 429 without Retry-After: the factory's List sent %d requests, the typed client's %d", got, want)
	}
}

// A 503 with "Retry-After: 0" is retried by Request.Do (checkWait reads
// the header for any 5xx), and by the factory's List.
func TestWireList503WithRetryAfterZeroIsRetried(t *testing.T) {
	s := retryThenPage(t, http.StatusServiceUnavailable, encodeAs(t, fuzzedPods(3, 1), true))
	cs := s.clientset(t)
	ctx := context.Background()
	_, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	want := len(s.reset())
	_, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{})
	got := len(s.reset())
	t.Logf("typed: %d requests, %v; factory: %d requests, %v", want, wantErr, got, err)
	if got != want || (err == nil) != (wantErr == nil) {
		t.Errorf("a 503 with Retry-After: 0, then the list: the factory's List sent %d requests (error %v), the typed client's %d (error %v)", got, err, want, wantErr)
	}
}

type retryRecorder struct {
	mu sync.Mutex
	n  int
}

func (r *retryRecorder) IncrementRetry(context.Context, string, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
}

func (r *retryRecorder) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = 0
	return n
}

// Request.Do counts each retry in rest_client_request_retries_total
// (withRetry.After). The factory's List counts those it makes through fresh
// Streams, which are no retries to client-go.
func TestWireListCountsRetriesInClientMetrics(t *testing.T) {
	retries := &retryRecorder{}
	old := metrics.RequestRetry
	metrics.RequestRetry = retries
	t.Cleanup(func() { metrics.RequestRetry = old })

	s := retryThenPage(t, http.StatusTooManyRequests, encodeAs(t, fuzzedPods(4, 1), true))
	cs := s.clientset(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	want := retries.take()
	s.reset()
	if _, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	got := retries.take()
	if got != want {
		t.Errorf("one retried List counted %d retries through the factory, %d through the typed client", got, want)
	}
}

// capPages is a tweak that caps the page size and the watch's timeout, as
// a controller behind a proxy with short timeouts might. It sets nothing
// on empty options, nor on the capture's limit=1 and empty watch.
func capPages(o *metav1.ListOptions) {
	if o.Limit > 100 {
		o.Limit = 100
	}
	if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 60 {
		sixty := int64(60)
		o.TimeoutSeconds = &sixty
	}
}

// docs/factory.md: "A newFunc's tweak applies to every request, as in
// client-go." That holds for a tweak that changes reflector parameters only
// for some reflector values: the factory's List and Watch send its page size
// and timeout.
func TestWireListConditionalTweakReachesListAndWatch(t *testing.T) {
	s := emptyPodServer(t)
	typed, wired := wiredFor(t, s.clientset(t), capPages)
	want := watchQueries(t, s, typed, 300)
	got := watchQueries(t, s, wired, 300)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a tweak capping limit and timeoutSeconds, the factory sent %v, the typed client %v", got, want)
	}
}
