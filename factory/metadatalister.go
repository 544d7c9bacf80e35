package factory

import (
	"context"
	"io"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/recovery"
)

// A recovery (recovery.Options) lists the collection's metadata and
// fetches what changed, through a recovery.Lister that lists
// exactly what the informer's ListerWatcher lists: the same resource,
// namespace and selectors. The factories build one for each informer whose
// ListerWatcher is client-go's own (its list is exactly its request) on a
// resource kube-apiserver serves from etcd, whose resourceVersions are etcd
// revisions: the typed factory's (every type of client-go's clientset). The
// metadata list is a protobuf PartialObjectMetadataList (client-go's metadata client,
// on the typed client's transport and rate limiter); the fetches are lists
// of one object (its name as a metadata.name field selector beside the
// informer's) or of a namespace, through the typed client, so they decode
// as the informer's list does. Where the metadata list cannot be made, a
// recovery lists the collection in full through the typed client and
// decodes only what changed (recovery.Lister.ListObjectsWire); with a protobuf client
// (rest.Config.ContentType) the unchanged objects are not decoded at all.
//
// A metadata factory's informer lists in full to recover: its objects are
// metadata, so its list is the metadata list, and holds what changed. For
// resources outside client-go's scheme (custom resources, which it cannot
// tell from aggregated APIs, whose server kube-apiserver only proxies to)
// it compares resourceVersions only for equality.
//
// Dynamic informers recover given a metadata client
// (PersistenceOptions.MetadataClient); without one they relist in full.

// NewMetadataLister returns the recovery.Lister of the collection of
// resource in namespace ("" for all namespaces, or a cluster-scoped
// resource) selected by selectors' label and field selectors, listed
// through rc, a typed clientset's REST client of the resource's
// group-version (for example clientset.CoreV1().RESTClient()). The caller
// vouches that the resource is served from etcd (any resource of
// kube-apiserver that is not aggregated). It returns nil if rc is not a
// *rest.RESTClient (a fake clientset); the informer then relists in full. Its QPS is rc's rate limiter's.
func NewMetadataLister(rc rest.Interface, resource, namespace string, selectors metav1.ListOptions) *recovery.Lister {
	r, ok := rc.(*rest.RESTClient)
	if !ok || r == nil {
		return nil
	}
	u := r.Get().URL() // the server's URL and the group-version's path
	gv := r.APIVersion()
	cfg := &rest.Config{
		Host:        (&url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}).String(),
		RateLimiter: r.GetRateLimiter(),
	}
	mc, err := metadata.NewForConfigAndClient(cfg, r.Client)
	if err != nil {
		return nil
	}
	l := &restLister{
		meta:      mc.Resource(gv.WithResource(resource)),
		objects:   rc,
		resource:  resource,
		namespace: namespace,
		label:     selectors.LabelSelector,
		field:     selectors.FieldSelector,
	}
	var qps float32
	if limiter := r.GetRateLimiter(); limiter != nil {
		qps = limiter.QPS() // a token bucket's rate does not change
	}
	return &recovery.Lister{
		ListMetadata:     l.ListMetadata,
		ListObjects:      l.ListObjects,
		ListMetadataWire: l.ListMetadataWire,
		ListObjectsWire:  l.ListObjectsWire,
		QPS:              qps,
	}
}

// restLister lists metadata through client-go's metadata client and objects
// through a typed REST client, both under the typed client's rate limiter.
type restLister struct {
	meta      metadata.Getter
	objects   rest.Interface
	resource  string
	namespace string
	label     string
	field     string
}

func (l *restLister) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	opts.LabelSelector, opts.FieldSelector = l.label, l.field
	return l.meta.Namespace(l.namespace).List(ctx, opts)
}

// ListMetadataWire is recovery.Lister.ListMetadataWire: ListMetadata's
// request through the typed REST client, its body as it arrives.
func (l *restLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	opts.LabelSelector, opts.FieldSelector = l.label, l.field
	return l.objects.Get().NamespaceIfScoped(l.namespace, l.namespace != "").Resource(l.resource).
		VersionedParams(&opts, scheme.ParameterCodec).SetHeader("Accept", recovery.MetadataListAccept).Stream(ctx)
}

func (l *restLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	return l.list(ctx, namespace, name, opts).Get()
}

// ListObjectsWire is recovery.Lister.ListObjectsWire: the body, as it
// arrives, is in the typed client's wire format (protobuf where its config
// asks for it), and the returned function decodes a whole body as a list of
// a type of client-go's scheme, which are the typed client's types.
func (l *restLister) ListObjectsWire(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	body, err := l.request(namespace, "", opts).Stream(ctx)
	if err != nil {
		return nil, nil, err
	}
	return body, func(b []byte) (runtime.Object, error) {
		return runtime.Decode(scheme.Codecs.UniversalDeserializer(), b)
	}, nil
}

// list makes ListObjects' request.
func (l *restLister) list(ctx context.Context, namespace, name string, opts metav1.ListOptions) rest.Result {
	return l.request(namespace, name, opts).Do(ctx)
}

// request is ListObjects' request.
func (l *restLister) request(namespace, name string, opts metav1.ListOptions) *rest.Request {
	opts.LabelSelector, opts.FieldSelector = l.label, withName(l.field, name)
	if namespace == "" {
		namespace = l.namespace
	}
	return l.objects.Get().NamespaceIfScoped(namespace, namespace != "").Resource(l.resource).
		VersionedParams(&opts, scheme.ParameterCodec)
}

// withName adds a metadata.name requirement to a field selector. The name
// is escaped: RBAC objects' names may hold "," and "=".
func withName(field, name string) string {
	switch {
	case name == "":
		return field
	case field == "":
		return fields.OneTermEqualSelector("metadata.name", name).String()
	}
	return field + "," + fields.OneTermEqualSelector("metadata.name", name).String()
}

// metadataLister lists for a metadata factory's informer's recovery
// (lister): its objects are metadata too.
type metadataLister struct {
	client    metadata.Interface
	gvr       schema.GroupVersionResource
	namespace string
	tweak     func(*metav1.ListOptions)
}

// lister is the recovery.Lister of l's methods.
func (l *metadataLister) lister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l *metadataLister) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return l.list(ctx, l.namespace, "", opts)
}

func (l *metadataLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	if namespace == "" {
		namespace = l.namespace
	}
	return l.list(ctx, namespace, name, opts)
}

func (l *metadataLister) list(ctx context.Context, namespace, name string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if l.tweak != nil {
		// The informer's tweak, as its ListerWatcher applies it; it sets
		// the selectors (and must leave the resourceVersion and paging
		// alone, as for any informer).
		l.tweak(&opts)
	}
	opts.FieldSelector = withName(opts.FieldSelector, name)
	return l.client.Resource(l.gvr).Namespace(namespace).List(ctx, opts)
}

// dynamicLister lists for a dynamic factory's informer's recovery (lister):
// metadata through a metadata client, objects through the dynamic client.
type dynamicLister struct {
	metadataLister
	client dynamic.Interface
}

// lister is the recovery.Lister of l's methods: the metadata lister's
// ListMetadata, and its own ListObjects.
func (l *dynamicLister) lister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l *dynamicLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	if namespace == "" {
		namespace = l.namespace
	}
	if l.tweak != nil {
		l.tweak(&opts)
	}
	opts.FieldSelector = withName(opts.FieldSelector, name)
	return l.client.Resource(l.gvr).Namespace(namespace).List(ctx, opts)
}

// dynamicRecovery returns the recovery settings of a dynamic factory's
// informer of gvr: none without a metadata client (PersistenceOptions.MetadataClient).
func dynamicRecovery(mc metadata.Interface, client dynamic.Interface, gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) *recovery.Options {
	if mc == nil {
		return nil
	}
	l := &dynamicLister{
		metadataLister: metadataLister{client: mc, gvr: gvr, namespace: namespace, tweak: tweak},
		client:         client,
	}
	return &recovery.Options{Lister: l.lister()}
}

// metadataRecovery returns the recovery settings of a metadata factory's
// informer of gvr. Its objects are metadata, so its own list is the
// metadata list and holds the changed objects: a recovery lists in full
// (recovery.Options.ListInFull), with no fetches. Outside the groups of
// client-go's scheme (served by kube-apiserver from etcd) the resource may
// be an aggregated API's, whose resourceVersions need not be etcd
// revisions: they are only told equal or not (OpaqueVersions).
func metadataRecovery(client metadata.Interface, gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) *recovery.Options {
	if client == nil {
		return nil
	}
	return &recovery.Options{
		Lister:         (&metadataLister{client: client, gvr: gvr, namespace: namespace, tweak: tweak}).lister(),
		ListInFull:     true,
		OpaqueVersions: !scheme.Scheme.IsGroupRegistered(gvr.Group),
	}
}

// typedRecovery returns the recovery settings of a typed factory's informer
// listing req of gvr: none for a ListerWatcher that is not client-go's own
// (it may filter in Go, which a metadata list would not) or a clientset
// without REST clients. f.lock is held.
func (f *Factory) typedRecovery(gvr schema.GroupVersionResource, req listRequest) *recovery.Options {
	if !req.requestOnly {
		return nil
	}
	lister := NewMetadataLister(f.restClientFor(gvr.GroupVersion()), gvr.Resource, req.namespace, req.options)
	if lister == nil {
		return nil
	}
	return &recovery.Options{Lister: lister}
}
