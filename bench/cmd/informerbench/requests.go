package main

import (
	"net/http"
	"strings"
	"sync/atomic"
)

// podRequests sits in an informer's transport: it counts the requests for
// Pods, so LIST counts come from the wire and not from the informer, and
// passes watch responses through gate. GETs without watch fall in four
// kinds, counted apart:
//   - probes: limit=1 at resourceVersion "", the consistent read a
//     catching-up warm start takes (see reflector.CatchUp); at most one
//     object;
//   - metaLists: pages of a metadata-only list (Accept asks for
//     PartialObjectMetadataList), a recovery's first step;
//   - fetches: lists in one namespace (one object by its name, or the
//     namespace), a recovery fetching what changed; the bench's informers
//     all list every namespace, so nothing else asks for one;
//   - lists: every other GET, a full list's pages.
//
// body counts the bytes of Pod responses as the apiserver encoded them
// (after any gzip is undone).
type podRequests struct {
	lists, probes, watches, watchLists atomic.Int64
	metaLists, fetches                 atomic.Int64
	body                               atomic.Int64
	// metaBody and fetchBody are the parts of body that metadata lists and
	// fetches read.
	metaBody, fetchBody atomic.Int64
	gate                *watchGate
}

// metadataListAccept is what client-go's metadata client asks for: the
// apiserver then answers with a PartialObjectMetadataList.
const metadataListAccept = "as=PartialObjectMetadataList"

func (c *podRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/pods") {
			return rt.RoundTrip(req)
		}
		q := req.URL.Query()
		watch := q.Get("watch") == "true" || q.Get("watch") == "1"
		var part *atomic.Int64
		switch {
		case !watch && q.Get("limit") == "1" && q.Get("resourceVersion") == "":
			c.probes.Add(1)
		case !watch && strings.Contains(req.Header.Get("Accept"), metadataListAccept):
			c.metaLists.Add(1)
			part = &c.metaBody
		case !watch && strings.Contains(req.URL.Path, "/namespaces/"):
			c.fetches.Add(1)
			part = &c.fetchBody
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
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.body, part: part}
		}
		if watch && err == nil && c.gate != nil {
			resp.Body = c.gate.wrap(resp.Body)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
