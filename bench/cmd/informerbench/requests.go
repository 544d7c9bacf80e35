package main

import (
	"net/http"
	"strings"
	"sync/atomic"
)

// podRequests sits in an informer's transport: it counts the requests for
// Pods, so LIST counts come from the wire and not from the informer, and
// passes watch responses through gate. A GET with limit=1 at
// resourceVersion "" (the consistent read a catching-up warm start takes,
// see reflector.CatchUp) is counted in probes, not in lists: it returns at
// most one object. body counts the bytes of Pod
// responses as the apiserver encoded them (after any gzip is undone).
type podRequests struct {
	lists, probes, watches, watchLists atomic.Int64
	body                               atomic.Int64
	gate                               *watchGate
}

func (c *podRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/pods") {
			return rt.RoundTrip(req)
		}
		q := req.URL.Query()
		watch := q.Get("watch") == "true" || q.Get("watch") == "1"
		switch {
		case !watch && q.Get("limit") == "1" && q.Get("resourceVersion") == "":
			c.probes.Add(1)
		case !watch:
			c.lists.Add(1)
		case q.Get("sendInitialEvents") == "true":
			c.watches.Add(1)
			c.watchLists.Add(1)
		default:
			c.watches.Add(1)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.body}
		}
		if watch && err == nil && c.gate != nil {
			resp.Body = c.gate.wrap(resp.Body)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
