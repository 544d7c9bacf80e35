package benchkit

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
)

// Kind is what a GET of a collection asks for.
type Kind int

const (
	// List is a full list's page.
	List Kind = iota
	// WatchList is a watch that streams the initial state first.
	WatchList
	// Watch is a watch from a resourceVersion.
	Watch
	// Probe is a limit=1 consistent read, as a warm start catching up makes.
	Probe
	// MetaList is a page of a metadata-only list, a recovery's first step.
	MetaList
	// Fetch is a list in one namespace or of one name, a recovery's fetch.
	Fetch
	numKinds
)

// metadataAccept is what client-go's metadata client asks for.
const metadataAccept = "as=PartialObjectMetadataList"

// Requests counts, in a client's transport, the GETs of one resource's
// collection by Kind and the bytes their responses carried (after gzip is
// undone), so counts come from the wire and not from the informer.
type Requests struct {
	// Resource is the collection counted, e.g. "pods".
	Resource string

	n, body [numKinds]atomic.Int64
	total   atomic.Int64 // every response's bytes, any resource
}

// Wrap is a rest.Config WrapTransport function.
func (c *Requests) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		kind, counted := c.classify(req)
		if counted {
			c.n[kind].Add(1)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.Body == nil {
			return resp, err
		}
		var part *atomic.Int64
		if counted {
			part = &c.body[kind]
		}
		resp.Body = &countingBody{ReadCloser: resp.Body, total: &c.total, part: part}
		return resp, err
	})
}

func (c *Requests) classify(req *http.Request) (Kind, bool) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+c.Resource) {
		return 0, false
	}
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		if q.Get("sendInitialEvents") == "true" {
			return WatchList, true
		}
		return Watch, true
	case q.Get("limit") == "1" && q.Get("resourceVersion") == "":
		return Probe, true
	case strings.Contains(req.Header.Get("Accept"), metadataAccept):
		return MetaList, true
	case strings.Contains(req.URL.Path, "/namespaces/"), strings.Contains(q.Get("fieldSelector"), "metadata.name="):
		return Fetch, true
	}
	return List, true
}

// Count is the number of requests of kind so far.
func (c *Requests) Count(kind Kind) int64 { return c.n[kind].Load() }

// Bytes is what the responses of kind carried so far.
func (c *Requests) Bytes(kind Kind) int64 { return c.body[kind].Load() }

// ResourceBytes is what every counted response of Resource carried.
func (c *Requests) ResourceBytes() int64 {
	var sum int64
	for k := range numKinds {
		sum += c.body[k].Load()
	}
	return sum
}

// TotalBytes is what every response read through Wrap carried.
func (c *Requests) TotalBytes() int64 { return c.total.Load() }

type countingBody struct {
	io.ReadCloser
	total, part *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.total.Add(int64(n))
	if b.part != nil {
		b.part.Add(int64(n))
	}
	return n, err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// ServerLists reads the apiserver's own counters (its /metrics): LIST
// requests so far, and the bytes it encoded for LIST responses and watch
// events, over every resource and client. Watch-lists stream the initial
// state as watch events, so bytes covers them.
func ServerLists(ctx context.Context, cs kubernetes.Interface) (lists, bytes float64, err error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			continue
		}
		list := strings.Contains(rest, `verb="LIST"`)
		switch {
		case name == "apiserver_request_total" && list:
			lists += v
		case name == "apiserver_response_sizes_sum" && list, name == "apiserver_watch_events_sizes_sum":
			bytes += v
		}
	}
	return lists, bytes, nil
}
