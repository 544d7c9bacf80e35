// Package crtest is what this module's tests share: one kube-apiserver (with
// etcd) per test package, a leak check after the package's tests, and a
// count of the LIST requests a client sends.
package crtest

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

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// Main is a TestMain body: it starts a kube-apiserver into *srv, runs the
// package's tests, stops the server and, if they passed, fails on leaked
// goroutines other than those ignored here and in ignore. It does not
// return.
func Main(m *testing.M, srv **apiservertest.Server, ignore ...goleak.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s, err := apiservertest.Launch(ctx, apiservertest.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*srv = s
	code := m.Run()
	s.Stop()
	if code == 0 {
		opts := append([]goleak.Option{
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			// http.Transport keeps idle connections to the apiserver.
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
			// controller-runtime wraps metadata watches in watch.Filter, whose
			// goroutine blocks forever on an event sent after the consumer
			// stopped reading (apimachinery v0.37.2 watch/filter.go); the
			// default cache leaks it the same way.
			goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
		}, ignore...)
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Requests counts the LIST requests a client sends, by resource (the last
// path element), so a test can tell a warm start (no LIST) from a cold one.
// The consistent reads a warm start catches up to (limit=1 at
// resourceVersion "", at most one object returned) are not LISTs of the
// collection; they are counted apart (Reads), as are the consistent
// metadata lists a small warm collection is proved caught up by
// (bcache.InformerOptions.WarmListBelow; MetadataLists). The zero value is
// ready to use.
type Requests struct {
	mu                      sync.Mutex
	lists, reads, metaLists map[string]int
}

// Wrap returns rt counting into r; use it as a rest.Config's WrapTransport.
func (r *Requests) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		// A LIST, or a watch that starts with the whole list (client-go's
		// WatchListClient): either way every object is sent again.
		isWatch := q.Get("watch") == "true" || q.Get("watch") == "1"
		if req.Method == http.MethodGet && (!isWatch || q.Get("sendInitialEvents") == "true") {
			segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
			// A collection: /api/v1/<r>, /api/v1/namespaces/<ns>/<r>,
			// /apis/<g>/<v>/<r>, /apis/<g>/<v>/namespaces/<ns>/<r>.
			n := len(segs)
			core := segs[0] == "api"
			if (core && (n == 3 || n == 5 && segs[2] == "namespaces")) || (!core && (n == 4 || n == 6 && segs[3] == "namespaces")) {
				r.mu.Lock()
				if r.lists == nil {
					r.lists, r.reads, r.metaLists = map[string]int{}, map[string]int{}, map[string]int{}
				}
				switch {
				case !isWatch && q.Get("limit") == "1" && q.Get("resourceVersion") == "":
					r.reads[segs[n-1]]++
				case !isWatch && q.Get("resourceVersion") == "" && q.Get("limit") == "10000" && strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList"):
					// recovery.ListVersions' pages; a metadata informer's
					// cold list is in pages of 500.
					r.metaLists[segs[n-1]]++
				default:
					r.lists[segs[n-1]]++
				}
				r.mu.Unlock()
			}
		}
		return rt.RoundTrip(req)
	})
}

// List returns the LIST requests sent for resource so far.
func (r *Requests) List(resource string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists[resource]
}

// MetadataLists returns the consistent metadata lists sent for resource so
// far.
func (r *Requests) MetadataLists(resource string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metaLists[resource]
}

// Reads returns the consistent limit=1 reads sent for resource so far.
func (r *Requests) Reads(resource string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[resource]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
