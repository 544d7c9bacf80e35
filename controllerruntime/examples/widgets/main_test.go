package widgets_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
)

// srv is one kube-apiserver (with etcd) for the package; tests keep apart by
// namespace. TestOperatorConvergesAfterExpiry restarts it.
var srv *apiservertest.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s, err := apiservertest.Launch(ctx, apiservertest.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Stop()
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
			// controller-runtime wraps metadata watches in watch.Filter, whose
			// goroutine blocks forever on an event sent after the consumer
			// stopped reading (apimachinery v0.37.2 watch/filter.go); the
			// default cache leaks it the same way.
			goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// requests counts LIST requests by resource (the last path element).
type requests struct {
	mu    sync.Mutex
	lists map[string]int
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		// A LIST, or a watch that starts with the whole list (client-go's
		// WatchListClient): either way every object is sent again.
		isWatch := q.Get("watch") == "true" || q.Get("watch") == "1"
		if req.Method == http.MethodGet && (!isWatch || q.Get("sendInitialEvents") == "true") {
			segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
			n := len(segs)
			core := segs[0] == "api"
			if (core && (n == 3 || n == 5 && segs[2] == "namespaces")) || (!core && (n == 4 || n == 6 && segs[3] == "namespaces")) {
				r.mu.Lock()
				if r.lists == nil {
					r.lists = map[string]int{}
				}
				r.lists[segs[n-1]]++
				r.mu.Unlock()
			}
		}
		return rt.RoundTrip(req)
	})
}

func (r *requests) list(resource string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists[resource]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
