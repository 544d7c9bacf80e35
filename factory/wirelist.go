package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"

	"github.com/boltinformer/boltinformer/internal/wire"
)

// Reaches into k8s.io/client-go rest/request.go and with_retry.go at
// v0.37.2: what Request.Do and Result.Into do for a typed client's List
// beyond Request.Stream, which list repeats. That is the retry of a failed
// connection and its metric, the timeout, the empty body's error and the
// Status answer's. It is also the request's latency and response size in
// client-go's metrics (Request.finalURLTemplate for a list). Stream itself
// retries answers with Retry-After as Do does.

// A typed client's List reads the body with io.ReadAll, which grows its
// buffer a quarter at a time. The protobuf serializer then copies the list's
// message out of its envelope before decoding it. Both copies are garbage
// made while a cold start's heap is largest. So the factory's informers
// stream each page through the clientset's REST client. The body is read
// into a buffer kept for the next page, and decoded where it lies.

// pageBuffer holds the buffer of a paged list's last body, for its next
// page. Generated protobuf Unmarshal methods copy every string and bytes
// field. So nothing decoded from a body aliases it, and its buffer is free
// once decoded. TestWireListObjectsOutliveTheirBody checks that over drawn
// objects. The buffer is dropped with the list's last page, so an informer
// holds none between lists. A sync.Pool would keep it until a collection,
// but it misses whenever the next page is read on another P.
type pageBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// take returns the buffer held, if any, and holds none.
func (p *pageBuffer) take() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := p.buf
	p.buf = nil
	return buf[:0]
}

// keep holds buf for the next page, unless it is too large. The caller
// must not use buf, or anything aliasing it, afterwards.
func (p *pageBuffer) keep(buf []byte) {
	if cap(buf) > maxPageBuffer {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = buf[:0]
}

// maxPageBuffer bounds the buffer held. A page of 500 Pods is about 4 MB.
const maxPageBuffer = 32 << 20

// listRetries is how many times list sends a request again: rest.Request's
// default maxRetries.
const listRetries = 10

// listRetryWait is how long list waits before it sends a request again
// after a failed connection: the Retry-After that Request.Do gives it.
const listRetryWait = time.Second

// list makes the request a typed client's List makes for resource, with
// opts, and returns the list decoded. It is of type want, as the typed
// client's. It fails as the typed client's List does for an error status,
// an empty body, a body cut short, or a Status answer. It reads the body
// into pages' buffer, and leaves it there if more pages follow. A read of
// one object (Limit 1) has a continue token that is rarely followed.
func (c *wireClient) list(ctx context.Context, namespace, resource string, opts metav1.ListOptions, want reflect.Type, pages *pageBuffer) (runtime.Object, error) {
	// As gentype's List: the timeout bounds the request and its body.
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// As gentype's List: every typed client of client-go prefers protobuf.
	newRequest := func() *rest.Request {
		return c.clientset.Get().UseProtobufAsDefaultIfPreferred(true).NamespaceIfScoped(namespace, namespace != "").
			Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout)
	}
	start, u := time.Now(), newRequest().URL()
	// As Request.Do: the latency covers the retries and the body's read.
	defer func() { metrics.RequestLatency.Observe(ctx, "GET", listURLTemplate(u, namespace), time.Since(start)) }()
	body, err := c.stream(ctx, u.Host, newRequest)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data, err := readBody(body, pages.take())
	if err == nil {
		// As Request.Do: a body not read whole has no size.
		metrics.ResponseSize.Observe(ctx, "GET", u.Host, float64(len(data)))
		// A body cut where a field of its envelope ends decodes as a
		// list without items, as recovery's lists check too.
		err = wire.CheckWhole(data)
	}
	if err != nil {
		return nil, fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", err)
	}
	obj, err := c.decodeList(data, want)
	if err != nil {
		return nil, err
	}
	if l, lerr := meta.ListAccessor(obj); lerr == nil && l.GetContinue() != "" && opts.Limit > 1 && wire.HasPrefix(data) {
		pages.keep(data)
	}
	return obj, nil
}

// stream sends the request newRequest makes until it is answered, or it
// was sent listRetries+1 times. Request.Do sends a GET again when its
// connection was reset, lost or closed early. Request.Stream does not, and a
// paged list would then start over. Each Stream retries answers with
// Retry-After itself, within what is left of the retries. Those of earlier
// Streams are not counted, so at worst more requests are sent than Do sends.
func (c *wireClient) stream(ctx context.Context, host string, newRequest func() *rest.Request) (io.ReadCloser, error) {
	for attempt := 0; ; attempt++ {
		body, err := newRequest().MaxRetries(listRetries - attempt).Stream(ctx)
		if attempt > 0 {
			// As withRetry.After counts the retries it makes.
			metrics.RequestRetry.IncrementRetry(ctx, retryCode(err), "GET", host)
		}
		if err == nil || attempt == listRetries ||
			!(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
			return body, err
		}
		t := time.NewTimer(c.retryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, previousError(ctx.Err(), err)
		case <-t.C:
		}
	}
}

// previousError returns err, which ended a retry, with the error of the
// attempt before it, as withRetry.WrapPreviousError words it.
func previousError(err, previous error) error {
	var urlErr *url.Error
	if errors.As(previous, &urlErr) && urlErr.Unwrap() != nil {
		previous = urlErr.Unwrap()
	}
	return fmt.Errorf("%w - error from a previous attempt: %w", err, previous)
}

// retryCode is the code label of rest_client_request_retries_total for an
// attempt's result: its status code, or "<error>" if it had no answer.
func retryCode(err error) string {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return strconv.Itoa(http.StatusOK)
	case errors.As(err, &status):
		return strconv.Itoa(int(status.Status().Code))
	}
	return "<error>"
}

// decodeList decodes data as Result.Into does, into a new object of the type
// data names, which must be want. A JSON body's objects may alias data.
func (c *wireClient) decodeList(data []byte, want reflect.Type) (runtime.Object, error) {
	mediaType := runtime.ContentTypeJSON
	if wire.HasPrefix(data) {
		mediaType = runtime.ContentTypeProtobuf
	}
	if len(data) == 0 {
		return nil, errors.New("0-length response")
	}
	decoder, err := c.decoders.Decoder(mediaType, nil)
	if err != nil {
		return nil, err
	}
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if status, ok := obj.(*metav1.Status); ok && status.Status != metav1.StatusSuccess {
		return nil, apierrors.FromObject(status)
	}
	if reflect.TypeOf(obj) != want {
		return nil, fmt.Errorf("boltinformer factory: a list of %v answered with %T", want, obj)
	}
	return obj, nil
}

// listURLTemplate returns u as client-go's metrics name a list request:
// each query value "{value}", and the namespace "{namespace}".
func listURLTemplate(u *url.URL, namespace string) url.URL {
	t := *u
	q := t.Query()
	for k := range q {
		q[k] = []string{"{value}"}
	}
	t.RawQuery = q.Encode()
	if namespace != "" {
		t.Path = strings.Replace(t.Path, "/namespaces/"+namespace+"/", "/namespaces/{namespace}/", 1)
	}
	return t
}

// readBody reads r to its end into buf[:0], and returns what it read, as
// io.ReadAll does. It doubles a buffer that is full: io.ReadAll's append
// grows a large one by a quarter, leaving about four bodies of garbage.
func readBody(r io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 512))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
