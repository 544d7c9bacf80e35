package factory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/boltinformer/boltinformer/internal/listidentity"
	"github.com/boltinformer/boltinformer/reflector"
)

// InformerFor receives a constructor, newFunc, that hides what its informer
// lists. This file learns it in three steps, without reaching the server.
//
//  1. newFunc is called with a capture clientset. That is a real clientset
//     whose transport records each request and answers it with an error.
//     So no request leaves the process.
//  2. Its informer's ListerWatcher is read from client-go's
//     sharedIndexInformer (see clientgo.go).
//  3. The ListerWatcher's List is called once, asking for one object, with
//     a short deadline. Through the capture clientset, it reaches the
//     recording transport at once. A List that records nothing used another
//     client. That one request, limit=1, may reach its server. Watch is
//     then called once the same way. The recorded URLs give the resource,
//     namespace and list options exactly as the server would receive them.
//
// The request names the collection. The informer lists through the
// ListerWatcher that newFunc builds with the factory's client. So whatever
// that ListerWatcher does in Go, such as filtering or rewriting, it still
// does. Anything not understood is reported as an error. So is a List and
// Watch that do not both reach the capture clientset for the example
// object's resource with the same filters. InformerFor then returns
// newFunc's own informer, as client-go's factory does.

// listRequest is what newFunc's informer lists. It holds the request its
// ListerWatcher sends, and whether anything besides that request decides
// what it lists.
type listRequest struct {
	// namespace is the namespace in the request path. It is "" for all
	// namespaces or a cluster-scoped resource.
	namespace string
	// options are the list options that newFunc's informer adds to the
	// reflector's, which are its selectors. Paging, resume, timeout and
	// watch fields are the reflector's, and do not change what a list holds.
	options metav1.ListOptions
	// code identifies the Go code of the ListerWatcher (listerWatcherCode).
	// requestOnly reports that it is client-go's own, whose list is exactly
	// the request. Otherwise it may filter or rewrite objects in Go.
	code        string
	requestOnly bool
	// setsReflectorParams reports that the ListerWatcher (its tweak) changed
	// the paging, resume, timeout or watch parameters of a probe
	// (reflectorProbes), or sent filters that depend on them. Only its own
	// calls then send what it sends.
	setsReflectorParams bool
	// identifier is the metrics name the captured informer took. A newFunc
	// may close over an InformerName instead of reading the factory's, which
	// is nil during the capture. Such a newFunc registers the name here
	// first. So this one is reserved, and the real informer's is a
	// duplicate.
	identifier cache.InformerNameAndResource
}

// captureTimeout bounds the List and Watch calls of a newFunc informer that
// does not use the capture clientset.
const captureTimeout = 5 * time.Second

// errCaptured is the recording transport's answer to every request.
var errCaptured = errors.New("boltinformer factory: request captured, not sent")

// captureClient is a clientset whose requests are recorded and never sent.
// Its methods are safe for concurrent use. A factory captures one newFunc
// at a time, under its lock, so requests() belong to that call.
type captureClient struct {
	client kubernetes.Interface

	mu       sync.Mutex
	recorded []*http.Request
}

func newCaptureClient() (*captureClient, error) {
	c := &captureClient{}
	cfg := &rest.Config{
		// .invalid never resolves (RFC 2606). The transport never dials
		// anyway.
		Host:        "http://boltinformer-capture.invalid",
		Transport:   c,
		RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(),
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("boltinformer factory: capture clientset: %w", err)
	}
	c.client = client
	return c, nil
}

// RoundTrip records req and fails it.
func (c *captureClient) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.recorded = append(c.recorded, req)
	c.mu.Unlock()
	return nil, errCaptured
}

// take returns the requests recorded since the last take.
func (c *captureClient) take() []*http.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.recorded
	c.recorded = nil
	return out
}

// capture learns what newFunc's informer for obj lists, through c.
func (c *captureClient) capture(obj runtime.Object, gvr schema.GroupVersionResource, newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (listRequest, error) {
	c.take()
	informer := newFunc(c.client, resync)
	if informer == nil {
		return listRequest{}, errors.New("newFunc returned nil")
	}
	parts, err := readClientGoInformer(informer)
	if err != nil {
		return listRequest{}, err
	}
	if reflect.TypeOf(parts.example) != reflect.TypeOf(obj) {
		return listRequest{}, fmt.Errorf("newFunc's informer holds %T, not %T", parts.example, obj)
	}

	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	withCtx := cache.ToListerWatcherWithContext(parts.listerWatcher)
	_, listErr := withCtx.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	list, err := c.oneRequest("List", listErr)
	if err != nil {
		return listRequest{}, err
	}
	w, watchErr := withCtx.WatchWithContext(ctx, metav1.ListOptions{})
	if w != nil {
		w.Stop()
	}
	watch, err := c.oneRequest("Watch", watchErr)
	if err != nil {
		return listRequest{}, err
	}
	req, err := parseListRequest(list, gvr)
	if err != nil {
		return listRequest{}, fmt.Errorf("its list request: %w", err)
	}
	wreq, err := parseListRequest(watch, gvr)
	if err != nil {
		return listRequest{}, fmt.Errorf("its watch request: %w", err)
	}
	if wreq.namespace != req.namespace || !reflect.DeepEqual(wreq.options, req.options) {
		return listRequest{}, fmt.Errorf("it watches namespace %q with %+v but lists namespace %q with %+v", wreq.namespace, wreq.options, req.namespace, req.options)
	}
	req.code, req.requestOnly = listerWatcherCode(parts.listerWatcher)
	req.setsReflectorParams, err = c.setsReflectorParams(ctx, withCtx, req)
	if err != nil {
		return listRequest{}, err
	}
	req.identifier = parts.identifier
	return req, nil
}

// reflectorProbes returns the list and watch options a capture sends
// through a ListerWatcher to see whether it changes the reflector's
// parameters. They hold the extremes this package's reflector sends: pages
// of 1 (a catch-up read) and of 500, watch timeouts of 3 s (a catch-up
// watch, reflector.DefaultCatchUpWatchTimeout) and of 300 s and 599 s (a
// watch's range). So a tweak capping or raising the page size or the
// timeout, or setting either where unset, changes one. Each call gets new
// probes: a tweak may write through their pointers.
func reflectorProbes() []metav1.ListOptions {
	watch := func(timeout int64) metav1.ListOptions {
		return metav1.ListOptions{Watch: true, ResourceVersion: "12345", AllowWatchBookmarks: true, TimeoutSeconds: ptr.To(timeout)}
	}
	return []metav1.ListOptions{
		{Limit: 1},
		{Limit: 500},
		{Limit: 500, ResourceVersion: "0"},
		{Limit: 500, Continue: "probe"},
		{ResourceVersion: "12345", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
		watch(int64(reflector.DefaultCatchUpWatchTimeout / time.Second)),
		watch(300),
		watch(599),
	}
}

// setsReflectorParams reports whether lw, a ListerWatcher of the capture
// clientset, changes a probe's reflector parameters or filters (changesProbes).
// Every probe is a call through the capture clientset, so it is counted in
// client-go's request metrics as a failed request to its host.
func (c *captureClient) setsReflectorParams(ctx context.Context, lw cache.ListerWatcherWithContext, req listRequest) (bool, error) {
	return changesProbes(req.options, func(probe metav1.ListOptions) (url.Values, error) {
		call, callErr := "List", error(nil)
		if probe.Watch {
			call = "Watch"
			opts := probe
			opts.Watch = false // the typed Watch sets it
			var w watch.Interface
			if w, callErr = lw.WatchWithContext(ctx, opts); w != nil {
				w.Stop()
			}
		} else {
			_, callErr = lw.ListWithContext(ctx, probe)
		}
		sent, err := c.oneRequest(call, callErr)
		if err != nil {
			return nil, err
		}
		q := sent.URL.Query()
		delete(q, "timeout") // the typed client's own, beside timeoutSeconds
		return q, nil
	})
}

// changesProbes reports whether send, the query a ListerWatcher sends for
// each of reflectorProbes, has other reflector parameters than the probe's,
// or other filters than filters'.
func changesProbes(filters metav1.ListOptions, send func(probe metav1.ListOptions) (url.Values, error)) (bool, error) {
	want := listidentity.Filters(listidentity.Query(filters))
	for _, probe := range reflectorProbes() {
		sent := listidentity.ReflectorParams(listidentity.Query(probe)) // before send may change it
		q, err := send(probe)
		if err != nil {
			return false, err
		}
		if !reflect.DeepEqual(listidentity.ReflectorParams(q), sent) ||
			!reflect.DeepEqual(listidentity.Filters(q), want) {
			return true, nil
		}
	}
	return false, nil
}

// oneRequest returns the one request a List or Watch call made through c.
func (c *captureClient) oneRequest(call string, callErr error) (*http.Request, error) {
	reqs := c.take()
	switch {
	case len(reqs) == 0:
		return nil, fmt.Errorf("its %s does not use the client passed to newFunc (result: %v)", call, callErr)
	case len(reqs) > 1:
		return nil, fmt.Errorf("its %s made %d requests, want 1", call, len(reqs))
	case !errors.Is(callErr, errCaptured):
		return nil, fmt.Errorf("its %s returned %v, want the capture error", call, callErr)
	}
	return reqs[0], nil
}

// parseListRequest returns the namespace and list options of a list or
// watch request for gvr.
func parseListRequest(req *http.Request, gvr schema.GroupVersionResource) (listRequest, error) {
	if req.Method != http.MethodGet {
		return listRequest{}, fmt.Errorf("%s %s is not a list", req.Method, req.URL.Path)
	}
	prefix := "/apis/" + gvr.Group + "/" + gvr.Version + "/"
	if gvr.Group == "" {
		prefix = "/api/" + gvr.Version + "/"
	}
	rest, ok := strings.CutPrefix(req.URL.Path, prefix)
	if !ok {
		return listRequest{}, fmt.Errorf("%s is not a request for %s", req.URL.Path, gvr)
	}
	var spec listRequest
	segs := strings.Split(rest, "/")
	if len(segs) == 3 && segs[0] == "namespaces" {
		spec.namespace, segs = segs[1], segs[2:]
	}
	if len(segs) != 1 || segs[0] != gvr.Resource {
		return listRequest{}, fmt.Errorf("%s is not a list of %s", req.URL.Path, gvr)
	}
	query := req.URL.Query()
	if err := metav1.Convert_url_Values_To_v1_ListOptions(&query, &spec.options, nil); err != nil {
		return listRequest{}, fmt.Errorf("query of %s: %w", req.URL, err)
	}
	spec.options = listidentity.FilterOptions(spec.options)
	return spec, nil
}
