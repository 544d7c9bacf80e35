// Package apicount counts what a client asks the apiserver for and the
// bytes it reads back, by resource and by kind of request, so that this
// module's tests and benches can tell a recovery after a 410 (a metadata
// list and fetches of single objects) from a full list.
//
// Bytes are counted as the client reads response bodies: after the HTTP
// transport undid any compression. Every method is safe for concurrent use.
package apicount

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// Kinds of requests to a collection.
const (
	// Watch is a watch that does not start with the whole collection.
	Watch = "watch"
	// WatchList is a watch that starts with the whole collection
	// (sendInitialEvents=true, client-go's WatchListClient): a list.
	WatchList = "watch-list"
	// Metadata is a list of the collection's metadata
	// (PartialObjectMetadataList): a recovery's metadata list, or any list
	// of a metadata-only informer.
	Metadata = "metadata"
	// Fetch is a list of one object (a metadata.name field selector): a
	// recovery's fetch.
	Fetch = "fetch"
	// Read is a consistent read of at most one object (limit=1 at
	// resourceVersion ""), which a warm informer catches up to, in any
	// form.
	Read = "read"
	// List is any other list: the whole collection, or a namespace.
	List = "list"
)

// Counter counts requests and response bytes. The zero value is ready to
// use.
type Counter struct {
	mu       sync.Mutex
	requests map[key]int64
	bytes    map[key]int64
	total    int64 // response bytes of every request, collections or not
}

type key struct{ resource, kind string }

// Wrap returns rt counting into c; use it as a rest.Config's WrapTransport.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		k, isCollection := classify(req)
		if isCollection {
			c.mu.Lock()
			if c.requests == nil {
				c.requests, c.bytes = map[key]int64{}, map[key]int64{}
			}
			c.requests[k]++
			c.mu.Unlock()
		}
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: c, k: k, collection: isCollection}
		}
		return resp, err
	})
}

// classify names a request's resource and kind; isCollection is false for
// anything but a GET of a collection.
func classify(req *http.Request) (k key, isCollection bool) {
	if req.Method != http.MethodGet {
		return key{}, false
	}
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// A collection: [prefix]/api/v1[/namespaces/<ns>]/<r> or
	// [prefix]/apis/<g>/<v>[/namespaces/<ns>]/<r>.
	root := -1
	for i, s := range segs {
		if s == "api" || s == "apis" {
			root = i
			break
		}
	}
	if root < 0 {
		return key{}, false
	}
	rest := len(segs) - root // segments from api(s) on
	if segs[root] == "apis" {
		rest--
	}
	if !(rest == 3 || rest == 5 && segs[len(segs)-3] == "namespaces") {
		return key{}, false
	}
	k.resource = segs[len(segs)-1]
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		k.kind = Watch
		if q.Get("sendInitialEvents") == "true" {
			k.kind = WatchList
		}
	case q.Get("limit") == "1" && q.Get("resourceVersion") == "":
		k.kind = Read
	case strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList"):
		k.kind = Metadata
	case strings.Contains(q.Get("fieldSelector"), "metadata.name="):
		k.kind = Fetch
	default:
		k.kind = List
	}
	return k, true
}

// Requests returns the requests of kind sent to resource's collection.
func (c *Counter) Requests(resource, kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[key{resource, kind}]
}

// Bytes returns the response bytes read of kind's requests to resource's
// collection.
func (c *Counter) Bytes(resource, kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[key{resource, kind}]
}

// TotalBytes returns the response bytes read of every request.
func (c *Counter) TotalBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

type countingBody struct {
	io.ReadCloser
	c          *Counter
	k          key
	collection bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.mu.Lock()
		b.c.total += int64(n)
		if b.collection {
			b.c.bytes[b.k] += int64(n) // made with requests, before the request
		}
		b.c.mu.Unlock()
	}
	return n, err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
