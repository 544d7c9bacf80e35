package controllerruntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// form is how an informer's objects are shaped; controller-runtime keeps
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

// objectKey names an informer's objects: form and GroupVersionKind.
type objectKey struct {
	form form
	gvk  schema.GroupVersionKind
}

// listIdentity is what an informer lists, learnt from the list request its
// ListerWatcher would send: controller-runtime hands NewInformer an opaque
// ListerWatcher whose closures hold the namespace and the selectors, so the
// request is the only place they can be read, and it is exactly what decides
// which objects come back.
type listIdentity struct {
	object    objectKey
	path      string     // the request path: API group, version, namespace, resource
	namespace string     // from path; "" for all namespaces or cluster scope
	query     url.Values // selectors and any other list parameters
}

// requestParams that belong to the reflector's paging and resuming, not to
// what is listed.
var requestParams = map[string]bool{
	"resourceVersion": true, "resourceVersionMatch": true, "limit": true, "continue": true,
	"timeoutSeconds": true, "timeout": true, "watch": true, "allowWatchBookmarks": true,
	"sendInitialEvents": true,
}

func newListIdentity(object objectKey, u *url.URL) listIdentity {
	id := listIdentity{object: object, path: u.Path, query: url.Values{}}
	for k, v := range u.Query() {
		if !requestParams[k] && !(len(v) == 1 && v[0] == "") {
			id.query[k] = v
		}
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := 0; i+2 < len(segs); i++ {
		if segs[i] == "namespaces" {
			id.namespace = segs[i+1]
			break
		}
	}
	return id
}

// String is the identity recorded with the collection
// (bcache.Persistence.ListIdentity).
func (id listIdentity) String() string {
	return fmt.Sprintf("%s %s GET %s?%s", id.object.form, id.object.gvk, id.path, id.query.Encode())
}

// collection is the collection name: readable and unique per identity.
//
//	typed apps/v1 Deployment ns=prod labels=app=web
//
// A declared transform version is part of the name too: objects are stored
// transformed, so another transform must not resume them.
func (id listIdentity) collection(transformVersion string) string {
	var b strings.Builder
	gv := id.object.gvk.GroupVersion().String()
	fmt.Fprintf(&b, "%s %s %s", id.object.form, gv, id.object.gvk.Kind)
	if id.namespace != "" {
		b.WriteString(" ns=" + id.namespace)
	}
	rest := url.Values{}
	for k, v := range id.query {
		rest[k] = v
	}
	for _, p := range []struct{ param, name string }{{"labelSelector", "labels"}, {"fieldSelector", "fields"}} {
		if v := rest.Get(p.param); v != "" {
			b.WriteString(" " + p.name + "=" + v)
		}
		delete(rest, p.param)
	}
	// The path carries the resource name, which a RESTMapper may map
	// differently over time; and rare parameters are hashed, not spelled.
	sum := sha256.Sum256([]byte(id.path + "?" + rest.Encode()))
	b.WriteString(" @" + hex.EncodeToString(sum[:4]))
	if transformVersion != "" {
		b.WriteString(" transform=" + transformVersion)
	}
	return b.String()
}

func (id listIdentity) description() map[string]string {
	d := map[string]string{
		"source":  "controller-runtime",
		"form":    string(id.object.form),
		"group":   id.object.gvk.Group,
		"version": id.object.gvk.Version,
		"kind":    id.object.gvk.Kind,
		"path":    id.path,
	}
	if id.namespace != "" {
		d["namespace"] = id.namespace
	}
	keys := make([]string, 0, len(id.query))
	for k := range id.query {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d[k] = strings.Join(id.query[k], ",")
	}
	return d
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
// for: typed objects arrive without one, so the scheme names them.
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
