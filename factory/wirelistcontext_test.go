package factory

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/metrics"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// capturedPodsListerWatcher returns the typed ListerWatcher of cs for Pods
// with tweak, and the factory's wire ListerWatcher for an InformerFor whose
// newFunc builds client-go's filtered Pod informer with tweak.
func capturedPodsListerWatcher(t *testing.T, cs kubernetes.Interface, tweak func(*metav1.ListOptions)) (typed, wired cache.ListerWatcherWithContext) {
	t.Helper()
	newFunc := func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(client, "", resync, cache.Indexers{}, tweak)
	}
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.capture(&corev1.Pod{}, podsGVR, newFunc, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !req.requestOnly || req.setsReflectorParams {
		t.Fatalf("client-go's Pod informer was not captured as request-only, setting no reflector parameters: %+v", req)
	}
	lw, err := typedListWatch(cs, &corev1.Pod{}, "", tweak)
	if err != nil {
		t.Fatal(err)
	}
	f := &Factory{client: cs}
	f.lock.Lock()
	w := f.wireListerWatcher(lw, &corev1.Pod{}, podsGVR, req)
	f.lock.Unlock()
	if w == lw {
		t.Fatal("the factory did not wire the captured informer's ListerWatcher")
	}
	return cache.ToListerWatcherWithContext(lw), cache.ToListerWatcherWithContext(w)
}

// emptyPodServer answers a list with no Pods and a watch with no events.
func emptyPodServer(t *testing.T) *scriptServer {
	return newScriptServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			return
		}
		_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "10"}})
	})
}

type resultRecorder struct {
	mu      sync.Mutex
	results []string
}

func (r *resultRecorder) Increment(_ context.Context, code, method, host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, method+" "+host+" "+code)
}

func (r *resultRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.results
	r.results = nil
	sort.Strings(out)
	return out
}

// client-go's typed List and Watch count one rest_client_requests_total
// result each, for the server they reach. The factory's must count the
// same: a failed request to a host nobody configured would alert.
func TestWireListCountsOnlyTheServersRequests(t *testing.T) {
	results := &resultRecorder{}
	old := metrics.RequestResult
	metrics.RequestResult = results
	t.Cleanup(func() { metrics.RequestResult = old })

	s := emptyPodServer(t)
	typed, wired := capturedPodsListerWatcher(t, s.clientset(t), nil)
	ctx := context.Background()
	run := func(lw cache.ListerWatcherWithContext) []string {
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500}); err != nil {
			t.Fatal(err)
		}
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		s.reset()
		return results.take()
	}
	results.take()
	want := run(typed)
	got := run(wired)
	if len(got) != len(want) {
		t.Errorf("one List and one Watch counted request results %q through the factory, %q through the typed client", got, want)
	}
}

// A List or Watch called with a cancelled context returns an error that is
// context.Canceled through the typed client: Request.Do sends nothing. A
// WatchErrorHandler may look for it to stay quiet during shutdown.
func TestWireListCancelledContextIsContextCanceled(t *testing.T) {
	s := emptyPodServer(t)
	typed, wired := capturedPodsListerWatcher(t, s.clientset(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, call := range []struct {
		name string
		do   func(lw cache.ListerWatcherWithContext) error
	}{
		{"List", func(lw cache.ListerWatcherWithContext) error {
			_, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
			return err
		}},
		{"Watch", func(lw cache.ListerWatcherWithContext) error {
			w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
			if w != nil {
				w.Stop()
			}
			return err
		}},
	} {
		wantErr, gotErr := call.do(typed), call.do(wired)
		if errors.Is(wantErr, context.Canceled) != errors.Is(gotErr, context.Canceled) {
			t.Errorf("%s with a cancelled context: the factory returned %q, the typed client %q", call.name, gotErr, wantErr)
		}
	}
	if n := len(s.reset()); n != 0 {
		t.Errorf("%d requests reached the server with a cancelled context", n)
	}
}

// resetTransport fails every request with a reset connection. The first
// request cancels the context the test lists with, as a shutdown would.
type resetTransport struct {
	mu     sync.Mutex
	n      int
	cancel context.CancelFunc
}

func (r *resetTransport) RoundTrip(*http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.cancel()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// A list whose connection was reset, and whose context is cancelled before
// the retry, ends with context.Canceled through Request.Do: withRetry.Before
// returns the context's error, wrapping the reset. The factory's List too.
func TestWireListCancelledDuringRetryWaitIsContextCanceled(t *testing.T) {
	listOnce := func(lw func(cs kubernetes.Interface) cache.ListerWatcherWithContext) (int, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rt := &resetTransport{cancel: cancel}
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://list.invalid", QPS: -1, Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		_, err = lw(cs).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.n, err
	}
	wantN, wantErr := listOnce(func(cs kubernetes.Interface) cache.ListerWatcherWithContext {
		lw, err := typedListWatch(cs, &corev1.Pod{}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cache.ToListerWatcherWithContext(lw)
	})
	gotN, gotErr := listOnce(func(cs kubernetes.Interface) cache.ListerWatcherWithContext {
		return podsListerWatcher(t, cs)
	})
	t.Logf("typed: %d requests, %v; factory: %d requests, %v", wantN, wantErr, gotN, gotErr)
	if errors.Is(wantErr, context.Canceled) != errors.Is(gotErr, context.Canceled) {
		t.Errorf("a reset list cancelled before its retry: the factory returned %q, the typed client %q", gotErr, wantErr)
	}
}
