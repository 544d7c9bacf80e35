package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/listidentity"
	"github.com/boltinformer/boltinformer/recovery"
)

// A recovery (recovery.Options) replaces the full list an informer makes
// after a 410. A 410 means its stored resourceVersion left the apiserver's
// watch history. That happens after a downtime longer than about 75 s, or
// after any apiserver restart. The recovery makes a metadata list, diffs it
// against the stored objects, and fetches what changed. Its recovery.Lister
// must list exactly what the informer's ListerWatcher lists. Here that
// ListerWatcher is controller-runtime's and opaque, since its closures hold
// the namespace and the selectors. So the adapter builds the recovery's lists
// as follows.
//
//   - The metadata list is client-go's metadata client on the cache's HTTP
//     client. It asks for the resource, namespace and selectors read from
//     the informer's own list request (probeList). It is used only if its
//     request, probed the same way, has the same path and selectors. The
//     diff then sees exactly the collection the informer stores. Its pages
//     are requested by that path through a REST client on the same HTTP
//     client. They are read as they arrive
//     (recovery.Lister.ListMetadataWire).
//   - A fetch is the informer's own list, through its ListerWatcher. So it
//     decodes as the informer's list does, typed through the cache's scheme
//     or unstructured, with the GroupVersionKind set. fetchTransport narrows
//     its request on its way out, under the cache's HTTP client. It adds a
//     metadata.name term to the field selector. The term goes beside the
//     informer's own selector, which controller-runtime writes over any the
//     caller passes. For an informer of all namespaces, it also puts the
//     namespace into the path, as client-go's clients build a namespaced
//     request.
//   - A typed informer of a built-in type also lists in full through the
//     REST client, by its list path and selectors (wireRecoveryLister). The
//     recovery reads that list undecoded where it lists in full. client-go's
//     scheme decodes it as the informer's own, since the Go types are the
//     same.
//
// A recovery compares resourceVersions as integers. That holds for what
// kube-apiserver serves from etcd, its built-in resources and custom
// resources. It does not hold for aggregated APIs, whose server
// kube-apiserver only proxies to. As the factories do, boltcr vouches for
// the groups of client-go's scheme, which are all built-in. It also vouches
// for the groups the user names in Options.RecoverGroups. Those are custom
// resources, which it cannot tell from aggregated APIs without discovery.
//
// A metadata-only informer (PartialObjectMetadata) recovers from its own
// list (recovery.Options.ListInFull). Its objects are metadata, so that
// list is the metadata list and holds what changed, with no metadata
// client and no fetches. Outside the groups vouched for, its
// resourceVersions are only told equal or not (OpaqueVersions). A relist
// would cost the same requests and also leave the unchanged objects alone.
// But it would deliver an object recreated under the same name as an
// update from the old UID to the new, where a recovery delivers its
// deletion and an add.

// recoveries builds the recoveries of a cache's informers.
type recoveries struct {
	meta metadata.Interface
	// wire lists metadata by the informers' own list paths
	// (recoveryLister.ListMetadataWire).
	wire rest.Interface
	// groups are the API groups vouched for besides client-go's scheme's
	// (Options.RecoverGroups).
	groups map[string]bool
	// qps is the rate the informers' REST clients allow, 0 for no limit, so
	// that the recovery plans fetches that fit it (recovery.Lister.QPS).
	qps float32
}

// newRecoveries returns the recoveries of a cache on config whose requests
// go through httpClient (with fetchTransport in its transport chain).
func newRecoveries(config *rest.Config, httpClient *http.Client, groups []string) (*recoveries, error) {
	cfg := rest.CopyConfig(config)
	// The metadata client uses its own serializer, not the caller's, as
	// controller-runtime builds its metadata clients.
	cfg.NegotiatedSerializer = nil
	mc, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metadata client for recoveries: %w", err)
	}
	wire, err := wireClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("REST client for recoveries: %w", err)
	}
	r := &recoveries{meta: mc, wire: wire, groups: map[string]bool{}, qps: clientQPS(config)}
	for _, g := range groups {
		r.groups[g] = true
	}
	return r, nil
}

// wireClient returns a REST client of config's server, for requests by
// absolute path (rest.Request.AbsPath). The path includes any path prefix
// of config's Host. So a metadata list goes to exactly the informer's
// list's path. The client decodes only error statuses.
func wireClient(config *rest.Config, httpClient *http.Client) (*rest.RESTClient, error) {
	base, _, err := rest.DefaultServerUrlFor(config)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(config)
	cfg.Host = (&url.URL{Scheme: base.Scheme, Host: base.Host, User: base.User}).String()
	cfg.APIPath = ""
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.RESTClientForConfigAndClient(cfg, httpClient)
}

// clientQPS is the sustained rate of the REST clients client-go builds from
// c, and 0 means none. Each client has its own token bucket unless
// c.RateLimiter is shared.
func clientQPS(c *rest.Config) float32 {
	switch {
	case c.RateLimiter != nil:
		return c.RateLimiter.QPS()
	case c.QPS == 0:
		return rest.DefaultQPS
	case c.QPS < 0: // controller-runtime's default: no client-side limit
		return 0
	}
	return c.QPS
}

// vouched reports whether key's resourceVersions are etcd revisions.
func (r *recoveries) vouched(key objectKey) bool {
	return scheme.Scheme.IsGroupRegistered(key.gvk.Group) || r.groups[key.gvk.Group]
}

// recovery returns the recovery settings of the informer of key, which
// lists what lw lists. list is its list request (probeList). It returns nil
// for an informer that relists in full after a 410 by design. Such an
// informer is typed or unstructured, of a group not vouched for. It returns
// nil and the reason for one whose list a metadata list cannot repeat
// exactly.
func (r *recoveries) recovery(lw toolscache.ListerWatcher, key objectKey, list *url.URL) (*recovery.Options, error) {
	switch {
	case key.form == formMetadata:
		// Its own list is the metadata list (see the file's header).
		return &recovery.Options{
			Lister:         ownListLister{toolscache.ToListerWatcherWithContext(lw)}.lister(),
			ListInFull:     true,
			OpaqueVersions: !r.vouched(key),
		}, nil
	case !r.vouched(key):
		return nil, nil // custom resources without RecoverGroups, as documented
	}
	target, err := parseListPath(list.Path)
	if err != nil {
		return nil, err
	}
	q := list.Query()
	for k, v := range listidentity.Filters(q) {
		if k != "labelSelector" && k != "fieldSelector" {
			return nil, fmt.Errorf("its list has the parameter %s=%q, which a metadata list cannot repeat", k, v)
		}
	}
	l := &recoveryLister{
		meta:   r.meta.Resource(key.gvk.GroupVersion().WithResource(target.resource)).Namespace(target.namespace),
		wire:   r.wire,
		lw:     toolscache.ToListerWatcherWithContext(lw),
		target: target,
		label:  q.Get("labelSelector"),
		field:  q.Get("fieldSelector"),
		qps:    r.qps,
	}
	// The metadata list must ask for exactly the informer's collection.
	probed, err := probeList(&toolscache.ListWatch{ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return l.ListMetadata(ctx, opts)
	}})
	if err != nil {
		return nil, fmt.Errorf("probing the metadata list: %w", err)
	}
	mq := probed.Query()
	if probed.Path != list.Path || mq.Get("labelSelector") != l.label || mq.Get("fieldSelector") != l.field {
		return nil, fmt.Errorf("the metadata list would ask %s?%s, not the informer's %s?%s", probed.Path, probed.RawQuery, list.Path, list.RawQuery)
	}
	if key.form == formTyped && scheme.Scheme.IsGroupRegistered(key.gvk.Group) {
		// client-go's scheme decodes built-in types as the informer's own
		// list does, and the server speaks protobuf for them.
		return &recovery.Options{Lister: wireRecoveryLister{l}.lister()}, nil
	}
	return &recovery.Options{Lister: l.lister()}, nil
}

// listPath is an informer's list request path, taken apart.
type listPath struct {
	path string
	// namespace is the path's namespace, "" for all namespaces or a
	// cluster-scoped resource. resource is the path's last element.
	namespace, resource string
}

// parseListPath takes apart a collection's path as client-go's clients
// build it: [prefix]/api/v1[/namespaces/<ns>]/<resource> or
// [prefix]/apis/<group>/<version>[/namespaces/<ns>]/<resource>.
func parseListPath(path string) (listPath, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	n := len(segs)
	if n < 3 {
		return listPath{}, fmt.Errorf("%q is not a collection's path", path)
	}
	p := listPath{path: path, resource: segs[n-1]}
	if n >= 5 && segs[n-3] == "namespaces" {
		p.namespace = segs[n-2]
	}
	return p, nil
}

// recoveryLister lists for one informer's recovery (see the file's
// header); lister makes its recovery.Lister.
type recoveryLister struct {
	meta   metadata.ResourceInterface
	wire   rest.Interface
	lw     toolscache.ListerWatcherWithContext
	target listPath
	label  string
	field  string
	qps    float32
}

// lister is the recovery.Lister of l's methods, with its client's QPS.
func (l *recoveryLister) lister() *recovery.Lister {
	return &recovery.Lister{
		ListMetadata:     l.ListMetadata,
		ListObjects:      l.ListObjects,
		ListMetadataWire: l.ListMetadataWire,
		QPS:              l.qps,
	}
}

// ListMetadata is recovery.Lister.ListMetadata.
func (l *recoveryLister) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	opts.LabelSelector, opts.FieldSelector = l.label, l.field
	return l.meta.List(ctx, opts)
}

// ListMetadataWire is recovery.Lister.ListMetadataWire. It makes
// ListMetadata's request, with the informer's list path and selectors as
// recovery probed them, and returns the body as it arrives.
func (l *recoveryLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	opts.LabelSelector, opts.FieldSelector = l.label, l.field
	return l.wire.Get().AbsPath(l.target.path).VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", recovery.MetadataListAccept).Stream(ctx)
}

// ListObjects is recovery.Lister.ListObjects, through the informer's
// own list, narrowed by fetchTransport.
func (l *recoveryLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	if err := l.inNamespace(namespace); err != nil {
		return nil, err
	}
	if name != "" || (namespace != "" && l.target.namespace == "") {
		ctx = context.WithValue(ctx, fetchKey{}, fetch{list: l.target, namespace: namespace, name: name})
	}
	return l.lw.ListWithContext(ctx, opts)
}

// wireRecoveryLister is the recoveryLister of a typed informer of a
// built-in type, which also lists whole objects undecoded. A recovery that
// lists in full then reads each item's identity from the protobuf, and
// decodes only the changed ones. A recovery lists in full when its metadata
// list's first page showed many changed, or metadata lists are refused.
type wireRecoveryLister struct{ *recoveryLister }

// lister is the recoveryLister's recovery.Lister with ListObjectsWire.
func (l wireRecoveryLister) lister() *recovery.Lister {
	lr := l.recoveryLister.lister()
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}

// listAccept asks for protobuf, which a recovery reads without decoding,
// or JSON.
const listAccept = "application/vnd.kubernetes.protobuf,application/json"

// ListObjectsWire is recovery.Lister.ListObjectsWire. It makes the informer's
// list request, with its path and selectors, through the wire client. The
// request is narrowed to namespace, as a fetch is, and the body returned
// undecoded as it arrives. decode decodes a whole body as a list of the
// informer's built-in type.
func (l wireRecoveryLister) ListObjectsWire(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	if err := l.inNamespace(namespace); err != nil {
		return nil, nil, err
	}
	u, err := fetch{list: l.target, namespace: namespace}.narrow(&url.URL{Path: l.target.path})
	if err != nil {
		return nil, nil, err
	}
	opts.LabelSelector, opts.FieldSelector = l.label, l.field
	body, err := l.wire.Get().AbsPath(u.Path).VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", listAccept).Stream(ctx)
	if err != nil {
		return nil, nil, err
	}
	decode := func(b []byte) (runtime.Object, error) {
		return runtime.Decode(scheme.Codecs.UniversalDeserializer(), b)
	}
	return body, decode, nil
}

// inNamespace refuses a request for another namespace than the one the
// informer lists ("" asks for the informer's own).
func (l *recoveryLister) inNamespace(namespace string) error {
	if l.target.namespace != "" && namespace != "" && namespace != l.target.namespace {
		return fmt.Errorf("boltcr: a recovery asked for namespace %q of an informer of namespace %q", namespace, l.target.namespace)
	}
	return nil
}

// fetchKey marks a context whose list request fetchTransport narrows to
// the fetch it carries.
type fetchKey struct{}

// fetch narrows an informer's list request (list) to namespace and the
// object named name, those that are set.
type fetch struct {
	list            listPath
	namespace, name string
}

// narrow returns u, a request of the informer's list, narrowed to f.
func (f fetch) narrow(u *url.URL) (*url.URL, error) {
	if u.Path != f.list.path {
		// The informer's ListerWatcher sent another request than its list,
		// and sending it unnarrowed would fetch more than asked.
		return nil, fmt.Errorf("boltcr: a recovery's fetch through the informer's list asked %s, not the informer's list %s", u.Path, f.list.path)
	}
	out := *u
	if f.namespace != "" && f.list.namespace == "" {
		i := strings.LastIndex(out.Path, "/")
		out.Path = out.Path[:i] + "/namespaces/" + f.namespace + out.Path[i:]
		out.RawPath = ""
	}
	if f.name != "" {
		q := out.Query()
		// The term is escaped, because RBAC objects' names may hold ","
		// and "=".
		field := fields.OneTermEqualSelector("metadata.name", f.name).String()
		if s := q.Get("fieldSelector"); s != "" {
			field = s + "," + field
		}
		q.Set("fieldSelector", field)
		out.RawQuery = q.Encode()
	}
	return &out, nil
}

// fetchTransport narrows the requests of contexts that carry a fetch and
// passes every request on to base.
type fetchTransport struct{ base http.RoundTripper }

func (t fetchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f, ok := req.Context().Value(fetchKey{}).(fetch)
	if !ok {
		return t.base.RoundTrip(req)
	}
	u, err := f.narrow(req.URL)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.URL = u
	return t.base.RoundTrip(req)
}

// ownListLister recovers a metadata-only informer from its own list
// (recovery.Options.ListInFull), which is all it is asked for.
type ownListLister struct {
	lw toolscache.ListerWatcherWithContext
}

// lister is the recovery.Lister of l's methods.
func (l ownListLister) lister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l ownListLister) ListMetadata(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return nil, errors.New("boltcr: a metadata-only informer's recovery lists in full")
}

func (l ownListLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	if namespace != "" || name != "" {
		return nil, fmt.Errorf("boltcr: a metadata-only informer's recovery lists in full, not %q %q", namespace, name)
	}
	return l.lw.ListWithContext(ctx, opts)
}
