package factory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// InformerFor receives a constructor, newFunc, that hides what its informer
// lists. This file learns it without reaching the server:
//
//  1. newFunc is called with a capture clientset: a real clientset whose
//     transport records each request and answers it with an error, so no
//     request leaves the process.
//  2. client-go has no getters for an informer's ListerWatcher, transform
//     or resync period, so they are read from client-go's
//     sharedIndexInformer (v0.37.2's fields, pinned by a test). Any other
//     informer implementation, or another layout, is not understood.
//  3. The ListerWatcher's List is called once, asking for one object, with
//     a short deadline: through the capture clientset it reaches the
//     recording transport at once. A List that records nothing used another
//     client (that one request, limit=1, may reach its server). Watch is
//     then called once the same way. The recorded URLs give the resource,
//     namespace and list options exactly as the server would receive them.
//
// Anything not understood, or a List and Watch that do not both reach the
// capture clientset for the example object's resource with the same
// filters, is reported as an error: InformerFor then returns newFunc's own
// informer, as client-go's factory does.

// informerSpec is what newFunc's informer lists and how it stores it.
type informerSpec struct {
	// namespace is the namespace in the request path; "" for all
	// namespaces or a cluster-scoped resource.
	namespace string
	// options are the list options newFunc's informer adds to the
	// reflector's: its selectors. Paging, resume, timeout and watch fields
	// are the reflector's, and do not change what a list holds.
	options   metav1.ListOptions
	resync    time.Duration
	indexers  cache.Indexers
	transform cache.TransformFunc
}

// tweak returns a TweakListOptionsFunc that sets s's options on the
// reflector's, as newFunc's informer does.
func (s informerSpec) tweak() internalinterfaces.TweakListOptionsFunc {
	want := s.options
	return func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = want.LabelSelector, want.FieldSelector
	}
}

// captureTimeout bounds the List and Watch calls of a newFunc informer that
// does not use the capture clientset.
const captureTimeout = 5 * time.Second

// errCaptured is the recording transport's answer to every request.
var errCaptured = errors.New("boltinformer factory: request captured, not sent")

// captureClient is a clientset whose requests are recorded and never sent.
// Its methods are safe for concurrent use; a factory captures one newFunc
// at a time (under its lock), so requests() belong to that call.
type captureClient struct {
	client kubernetes.Interface

	mu       sync.Mutex
	recorded []*http.Request
}

func newCaptureClient() (*captureClient, error) {
	c := &captureClient{}
	cfg := &rest.Config{
		// .invalid never resolves (RFC 2606); the transport never dials anyway.
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
func (c *captureClient) capture(obj runtime.Object, gvr schema.GroupVersionResource, newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (informerSpec, error) {
	c.take()
	informer := newFunc(c.client, resync)
	if informer == nil {
		return informerSpec{}, errors.New("newFunc returned nil")
	}
	inner, err := clientGoInformer(informer)
	if err != nil {
		return informerSpec{}, err
	}
	lw, ok1 := unexportedField[cache.ListerWatcher](inner, "listerWatcher")
	transform, ok2 := unexportedField[cache.TransformFunc](inner, "transform")
	informerResync, ok3 := unexportedField[time.Duration](inner, "defaultEventHandlerResyncPeriod")
	example, ok4 := unexportedField[runtime.Object](inner, "objectType")
	if !ok1 || !ok2 || !ok3 || !ok4 || lw == nil {
		return informerSpec{}, fmt.Errorf("%T does not have client-go v0.37.2's fields", informer)
	}
	if reflect.TypeOf(example) != reflect.TypeOf(obj) {
		return informerSpec{}, fmt.Errorf("newFunc's informer holds %T, not %T", example, obj)
	}

	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	withCtx := cache.ToListerWatcherWithContext(lw)
	_, listErr := withCtx.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	list, err := c.oneRequest("List", listErr)
	if err != nil {
		return informerSpec{}, err
	}
	w, watchErr := withCtx.WatchWithContext(ctx, metav1.ListOptions{})
	if w != nil {
		w.Stop()
	}
	watch, err := c.oneRequest("Watch", watchErr)
	if err != nil {
		return informerSpec{}, err
	}
	spec, err := parseListRequest(list, gvr)
	if err != nil {
		return informerSpec{}, fmt.Errorf("its list request: %w", err)
	}
	wspec, err := parseListRequest(watch, gvr)
	if err != nil {
		return informerSpec{}, fmt.Errorf("its watch request: %w", err)
	}
	if wspec.namespace != spec.namespace || !reflect.DeepEqual(wspec.options, spec.options) {
		return informerSpec{}, fmt.Errorf("it watches namespace %q with %+v but lists namespace %q with %+v", wspec.namespace, wspec.options, spec.namespace, spec.options)
	}
	spec.resync = informerResync
	spec.indexers = informer.GetIndexer().GetIndexers()
	spec.transform = transform
	return spec, nil
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
func parseListRequest(req *http.Request, gvr schema.GroupVersionResource) (informerSpec, error) {
	if req.Method != http.MethodGet {
		return informerSpec{}, fmt.Errorf("%s %s is not a list", req.Method, req.URL.Path)
	}
	prefix := "/apis/" + gvr.Group + "/" + gvr.Version + "/"
	if gvr.Group == "" {
		prefix = "/api/" + gvr.Version + "/"
	}
	rest, ok := strings.CutPrefix(req.URL.Path, prefix)
	if !ok {
		return informerSpec{}, fmt.Errorf("%s is not a request for %s", req.URL.Path, gvr)
	}
	var spec informerSpec
	segs := strings.Split(rest, "/")
	if len(segs) == 3 && segs[0] == "namespaces" {
		spec.namespace, segs = segs[1], segs[2:]
	}
	if len(segs) != 1 || segs[0] != gvr.Resource {
		return informerSpec{}, fmt.Errorf("%s is not a list of %s", req.URL.Path, gvr)
	}
	query := req.URL.Query()
	if err := metav1.Convert_url_Values_To_v1_ListOptions(&query, &spec.options, nil); err != nil {
		return informerSpec{}, fmt.Errorf("query of %s: %w", req.URL, err)
	}
	spec.options = listFilters(spec.options)
	return spec, nil
}

// listFilters returns opts without the fields the reflector sets for
// paging, resuming and watching: what is left (the selectors) decides which
// objects a list returns.
func listFilters(opts metav1.ListOptions) metav1.ListOptions {
	opts.TypeMeta = metav1.TypeMeta{}
	opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	opts.Limit, opts.Continue, opts.TimeoutSeconds = 0, "", nil
	opts.Watch, opts.AllowWatchBookmarks = false, false
	opts.SendInitialEvents = nil
	return opts
}

// clientGoInformer returns the client-go sharedIndexInformer informer is, or
// wraps as client-go's typed informers do (a typedSharedIndexInformer
// embedding it). Other wrappers may change behaviour, so they are not
// looked through.
func clientGoInformer(informer cache.SharedIndexInformer) (reflect.Value, error) {
	const pkg = "k8s.io/client-go/tools/cache"
	v := reflect.ValueOf(informer)
	for range 2 {
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			break
		}
		t := v.Elem().Type()
		if t.PkgPath() != pkg {
			break
		}
		if t.Name() == "sharedIndexInformer" {
			return v.Elem(), nil
		}
		if !strings.HasPrefix(t.Name(), "typedSharedIndexInformer[") {
			break
		}
		embedded, ok := v.Elem().FieldByName("SharedIndexInformer").Interface().(cache.SharedIndexInformer)
		if !ok {
			break
		}
		v = reflect.ValueOf(embedded)
	}
	return reflect.Value{}, fmt.Errorf("%T is not client-go's shared informer", informer)
}

// unexportedField reads the field name of the addressable struct v, if it
// exists with type T. It is read once, before the informer has started, so
// no lock of the informer's guards it.
func unexportedField[T any](v reflect.Value, name string) (T, bool) {
	var zero T
	f := v.FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() || !f.CanAddr() {
		return zero, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(T), true
}
