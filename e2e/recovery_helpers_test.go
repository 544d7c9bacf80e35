package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
)

// byteCounter counts the requests a client makes for one resource and the
// response bytes it reads (as the client reads them, after any
// decompression), by kind of request: "watch", "metadata" (a
// PartialObjectMetadataList), "fetch" (a list with a metadata.name field
// selector), "probe" (limit=1 at resourceVersion ""), and "list" (any other
// list: a namespace, the whole collection).
type byteCounter struct {
	resource string

	mu       sync.Mutex
	bytes    map[string]int64
	requests map[string]int64
	types    map[string]string // the content type of the last response
}

func newByteCounter(resource string) *byteCounter {
	return &byteCounter{resource: resource, bytes: map[string]int64{}, requests: map[string]int64{}}
}

func requestKind(req *http.Request) string {
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		return "watch"
	case strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList"):
		return "metadata"
	case strings.Contains(q.Get("fieldSelector"), "metadata.name="):
		return "fetch"
	case q.Get("limit") == "1" && q.Get("resourceVersion") == "":
		return "probe"
	}
	return "list"
}

func (c *byteCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+c.resource) {
			return rt.RoundTrip(req)
		}
		kind := requestKind(req)
		c.mu.Lock()
		c.requests[kind]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil {
			c.mu.Lock()
			if c.types == nil {
				c.types = map[string]string{}
			}
			c.types[kind] = resp.Header.Get("Content-Type")
			c.mu.Unlock()
		}
		if err == nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: c, kind: kind}
		}
		return resp, err
	})
}

type countingBody struct {
	io.ReadCloser
	c    *byteCounter
	kind string
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.bytes[b.kind] += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// snapshot returns the bytes and requests by kind.
func (c *byteCounter) snapshot() (bytes, requests map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bytes, requests = map[string]int64{}, map[string]int64{}
	for k, v := range c.bytes {
		bytes[k] = v
	}
	for k, v := range c.requests {
		requests[k] = v
	}
	return bytes, requests
}

func (c *byteCounter) String() string {
	bytes, requests := c.snapshot()
	kinds := make([]string, 0, len(requests))
	for k := range requests {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s: %d requests, %s", k, requests[k], mib(bytes[k])))
	}
	return strings.Join(parts, "; ")
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// realisticPod is fixture Pod i as created in namespace ns, labelled for
// test: about 3.1 KB of protobuf before the apiserver adds its managed
// fields.
func realisticPod(ns, test string, i int) *corev1.Pod {
	p := fixture.Pod(i)
	p.Namespace = ns
	p.Status = corev1.PodStatus{}
	p.UID, p.ResourceVersion, p.GenerateName = "", "", ""
	p.CreationTimestamp = metav1.Time{}
	p.OwnerReferences = nil
	p.Labels[e2eLabel] = test
	return p
}

// populateRealisticPods creates n realistic Pods spread over namespaces.
func populateRealisticPods(t testing.TB, cs kubernetes.Interface, test string, namespaces []string, n int) state {
	t.Helper()
	return populate(t, "pods", namespaces, n, func(ctx context.Context, ns string, i int) (metav1.Object, error) {
		return cs.CoreV1().Pods(ns).Create(ctx, realisticPod(ns, test, i), metav1.CreateOptions{})
	})
}

// realisticConfigMap is fixture ConfigMap i as created in namespace ns,
// labelled for test: about 1.5 KB before the apiserver adds its managed
// fields.
func realisticConfigMap(ns, test string, i int) *corev1.ConfigMap {
	cm := fixture.ConfigMap(i)
	cm.Namespace = ns
	cm.UID, cm.ResourceVersion = "", ""
	cm.CreationTimestamp = metav1.Time{}
	cm.Labels[e2eLabel] = test
	return cm
}

// populateRealisticConfigMaps creates n realistic ConfigMaps spread over
// namespaces.
func populateRealisticConfigMaps(t testing.TB, cs kubernetes.Interface, test string, namespaces []string, n int) state {
	t.Helper()
	return populate(t, "configmaps", namespaces, n, func(ctx context.Context, ns string, i int) (metav1.Object, error) {
		return cs.CoreV1().ConfigMaps(ns).Create(ctx, realisticConfigMap(ns, test, i), metav1.CreateOptions{})
	})
}
