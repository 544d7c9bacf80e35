package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// form is how an informer's objects are shaped. controller-runtime keeps
// one informer per form and GroupVersionKind, and so do we.
type form string

const (
	formTyped        form = "typed"
	formUnstructured form = "unstructured"
	formMetadata     form = "metadata"
)

// formOf classifies obj as controller-runtime's Informers.informersByType
// does (pkg/cache/internal/informers.go, v0.25.2).
func formOf(obj runtime.Object) form {
	switch obj.(type) {
	case runtime.Unstructured:
		return formUnstructured
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return formMetadata
	default:
		return formTyped
	}
}

// objectKey names an informer's objects by form and GroupVersionKind.
type objectKey struct {
	form form
	gvk  schema.GroupVersionKind
}

// probeKey marks a context whose list request must be captured, not sent.
type probeKey struct{}

// errProbed ends a captured request.
var errProbed = errors.New("boltinformer: list request captured to identify the informer, not sent")

// probeTransport captures the requests of probing contexts and passes every
// other request to base.
type probeTransport struct{ base http.RoundTripper }

func (t probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if p, ok := req.Context().Value(probeKey{}).(*url.URL); ok {
		*p = *req.URL
		return nil, errProbed
	}
	return t.base.RoundTrip(req)
}

// probeList learns what lw lists by letting it build its list request and
// capturing that request before it is sent. It fails if lw's request does
// not go through the cache's HTTP client.
func probeList(lw toolscache.ListerWatcher) (*url.URL, error) {
	captured := &url.URL{}
	ctx := context.WithValue(context.Background(), probeKey{}, captured)
	_, err := toolscache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{})
	if captured.Path == "" {
		return nil, fmt.Errorf("the informer's list request did not go through the cache's HTTP client (error: %v)", err)
	}
	return captured, nil
}

// gvkOf returns the GroupVersionKind an informer's example object stands
// for. Typed objects arrive without one, so the scheme names them.
func gvkOf(obj runtime.Object, s *runtime.Scheme) (schema.GroupVersionKind, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			return gvk, fmt.Errorf("%T without a GroupVersionKind", obj)
		}
		return gvk, nil
	}
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}
