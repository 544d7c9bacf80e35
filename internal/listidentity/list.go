package listidentity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion/queryparams"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// spelling is how a List's names are written; see the package doc.
type spelling int

const (
	spellingFactory           spelling = iota + 1 // FromOptions
	spellingControllerRuntime                     // FromRequest
)

// List is what an informer lists. The zero value is not a list: build one
// with FromOptions or FromRequest.
type List struct {
	spelling spelling
	// source is who lists and in which shape the objects are stored: the
	// factories' "typed", "dynamic" or "metadata", or controller-runtime's
	// form ("typed", "unstructured" or "metadata"). Typed and unstructured
	// objects of one resource are stored apart.
	source string
	// gvr is the resource; its Resource is "" in a List from FromRequest,
	// whose path holds it.
	gvr schema.GroupVersionResource
	// kind is the objects' kind; "" where the caller does not know it
	// (the dynamic and metadata factories).
	kind string
	// namespace limits the list; "" for all namespaces.
	namespace string
	// filters are the request's parameters that decide which objects come
	// back (Filters); never nil.
	filters url.Values
	// path is the request path as sent (FromRequest): it may carry a
	// prefix of the apiserver's URL, and names the resource as the
	// RESTMapper mapped it.
	path string
	// listerWatcher identifies a custom ListerWatcher (WithListerWatcher);
	// nil for client-go's own, whose list is exactly the request.
	listerWatcher *listerWatcher
	// transformVersion is the declared transform version the
	// controller-runtime spelling writes into the collection name: objects
	// are stored transformed, so another transform must not resume them.
	transformVersion string
}

// listerWatcher identifies a ListerWatcher's Go code: the names of its
// functions and the version declared for it. Go names cannot see what a
// closure closes over, nor a changed body, so the declared version is what
// vouches for the code; a changed name still starts cold.
type listerWatcher struct {
	Code    string `json:"code"`
	Version string `json:"version"`
}

// reflectorParams are the list and watch parameters the reflector sets for
// paging, resuming, timing out and watching: they do not change which
// objects a list holds, so they are not filters. "timeout" is the client's
// request timeout, not a ListOptions field.
var reflectorParams = []string{
	"resourceVersion", "resourceVersionMatch", "limit", "continue",
	"timeoutSeconds", "timeout", "watch", "allowWatchBookmarks", "sendInitialEvents",
}

// Filters returns the parameters of a list or watch request's query that
// decide which objects it returns: all but the reflector's (paging,
// resuming, watching) and those without a value. The result is never nil
// and shares no slices with query.
func Filters(query url.Values) url.Values {
	out := url.Values{}
	for k, v := range query {
		if slices.Contains(reflectorParams, k) || (len(v) == 1 && v[0] == "") {
			continue
		}
		out[k] = slices.Clone(v)
	}
	return out
}

// ReflectorParams returns the parameters of query that are the reflector's
// (paging, resuming, timing out, watching), those with a value.
func ReflectorParams(query url.Values) url.Values {
	out := url.Values{}
	for k, v := range query {
		if slices.Contains(reflectorParams, k) && !(len(v) == 1 && v[0] == "") {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// Query returns the query parameters opts sends, as client-go's parameter
// codec encodes them.
func Query(opts metav1.ListOptions) url.Values { return query(opts) }

// query returns the query parameters opts sends, encoded as client-go's
// parameter codec encodes them (queryparams.Convert).
func query(opts metav1.ListOptions) url.Values {
	q, err := queryparams.Convert(&opts)
	if err != nil {
		// Convert fails only for what is not a pointer to a struct.
		panic(fmt.Sprintf("listidentity: encoding ListOptions: %v", err))
	}
	return q
}

// options returns filters as list options. Filters of a List from
// FromOptions came from list options, so they convert back; parameters
// that are not ListOptions fields are dropped.
func options(filters url.Values) metav1.ListOptions {
	var opts metav1.ListOptions
	q := url.Values{}
	for k, v := range filters {
		q[k] = slices.Clone(v)
	}
	if err := metav1.Convert_url_Values_To_v1_ListOptions(&q, &opts, nil); err != nil {
		// A filter of a ListOptions field holds what that field encoded to.
		panic(fmt.Sprintf("listidentity: decoding list options %v: %v", filters, err))
	}
	return opts
}

// FilterOptions returns opts with only its filters: what is left decides
// which objects a list returns. It applies the rule Filters applies to a
// query, field by field.
func FilterOptions(opts metav1.ListOptions) metav1.ListOptions {
	return options(Filters(query(opts)))
}

// FromOptions returns the List of a factory's informer: source ("typed",
// "dynamic" or "metadata"), resource gvr, kind ("" if not known), namespace
// ("" for all) and the list options it sends; only their filters count.
func FromOptions(source string, gvr schema.GroupVersionResource, kind, namespace string, opts metav1.ListOptions) List {
	return List{spelling: spellingFactory, source: source, gvr: gvr, kind: kind, namespace: namespace, filters: Filters(query(opts))}
}

// FromRequest returns the List of a controller-runtime informer of form
// ("typed", "unstructured" or "metadata") and gvk whose list request is u,
// with the transform version its objects are stored under. The namespace
// is read from u's path; its host is not part of the list.
func FromRequest(form string, gvk schema.GroupVersionKind, u *url.URL, transformVersion string) List {
	return List{
		spelling:         spellingControllerRuntime,
		source:           form,
		gvr:              schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version},
		kind:             gvk.Kind,
		namespace:        namespaceOf(u.Path),
		filters:          Filters(u.Query()),
		path:             u.Path,
		transformVersion: transformVersion,
	}
}

// namespaceOf returns the namespace of a request path
// (.../namespaces/<ns>/<resource>), "" for all namespaces or a
// cluster-scoped resource.
func namespaceOf(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(segs); i++ {
		if segs[i] == "namespaces" {
			return segs[i+1]
		}
	}
	return ""
}

// WithListerWatcher returns l listed through a ListerWatcher that is not
// client-go's own: code names its functions, version is the version
// declared for them. Both are part of the identity; the collection name
// says only that the ListerWatcher is custom, so a changed version starts
// the same collection cold instead of leaving the old one in the file.
// Only the factories take custom ListerWatchers: it panics on a List from
// FromRequest, whose spelling has no place for one.
func (l List) WithListerWatcher(code, version string) List {
	if l.spelling != spellingFactory {
		panic("listidentity: WithListerWatcher on a List from FromRequest")
	}
	l.listerWatcher = &listerWatcher{Code: code, Version: version}
	return l
}

// Namespace is the namespace the list is limited to; "" for all.
func (l List) Namespace() string { return l.namespace }

// String is the list identity (cache.Persistence.ListIdentity): every part
// of the List, in a fixed order.
func (l List) String() string {
	if l.spelling == spellingControllerRuntime {
		gvk := schema.GroupVersionKind{Group: l.gvr.Group, Version: l.gvr.Version, Kind: l.kind}
		return fmt.Sprintf("%s %s GET %s?%s", l.source, gvk, l.path, l.filters.Encode())
	}
	raw, err := json.Marshal(struct {
		Source    string             `json:"source"`
		Group     string             `json:"group"`
		Version   string             `json:"version"`
		Resource  string             `json:"resource"`
		Kind      string             `json:"kind,omitempty"`
		Namespace string             `json:"namespace,omitempty"`
		Options   metav1.ListOptions `json:"options"`
		// ListerWatcher is omitted for client-go's own ListerWatchers (the
		// generated informers'), so their identity is the same as before
		// custom ListerWatchers were told apart: their collections stay warm.
		ListerWatcher *listerWatcher `json:"listerWatcher,omitempty"`
	}{l.source, l.gvr.Group, l.gvr.Version, l.gvr.Resource, l.kind, l.namespace, options(l.filters), l.listerWatcher})
	if err != nil {
		panic(fmt.Sprintf("listidentity: encoding %#v: %v", l, err)) // strings only
	}
	return string(raw)
}

// Collection is the collection name: readable, unique per List.
//
//	typed/apps/v1/deployments ns=prod labels=app=web         (FromOptions)
//	typed apps/v1 Deployment ns=prod labels=app=web @1a2b3c4d (FromRequest)
//
// Namespace and selectors are spelled out; other filters (rare) are folded
// into a hash. A List from FromOptions through a custom ListerWatcher ends
// in " listwatch=custom"; a List from FromRequest always ends in a hash of
// its path (which names the resource as the RESTMapper mapped it, and may
// change) and other filters, then its transform version if declared.
func (l List) Collection() string {
	var b strings.Builder
	if l.spelling == spellingControllerRuntime {
		fmt.Fprintf(&b, "%s %s %s", l.source, l.gvr.GroupVersion(), l.kind)
	} else {
		b.WriteString(l.source + "/")
		if l.gvr.Group != "" {
			b.WriteString(l.gvr.Group + "/")
		}
		b.WriteString(l.gvr.Version + "/" + l.gvr.Resource)
	}
	if l.namespace != "" {
		b.WriteString(" ns=" + l.namespace)
	}
	for _, s := range selectors {
		if v := l.filters.Get(s.param); v != "" {
			b.WriteString(" " + s.name + "=" + v)
		}
	}
	rest := url.Values{}
	for k, v := range l.filters {
		if !slices.ContainsFunc(selectors, func(s selector) bool { return s.param == k }) {
			rest[k] = v
		}
	}
	if l.spelling == spellingControllerRuntime {
		sum := sha256.Sum256([]byte(l.path + "?" + rest.Encode()))
		b.WriteString(" @" + hex.EncodeToString(sum[:4]))
		if l.transformVersion != "" {
			b.WriteString(" transform=" + l.transformVersion)
		}
		return b.String()
	}
	if len(rest) > 0 {
		raw, err := json.Marshal(options(rest))
		if err != nil {
			panic(fmt.Sprintf("listidentity: encoding %v: %v", rest, err)) // strings only
		}
		sum := sha256.Sum256(raw)
		b.WriteString(" options=" + hex.EncodeToString(sum[:6]))
	}
	if l.listerWatcher != nil {
		b.WriteString(" listwatch=custom")
	}
	return b.String()
}

// selector is a filter spelled out in collection names.
type selector struct{ param, name string }

var selectors = []selector{{"labelSelector", "labels"}, {"fieldSelector", "fields"}}

// Description is what tools such as inspect show for the collection.
func (l List) Description() map[string]string {
	d := map[string]string{
		"group":   l.gvr.Group,
		"version": l.gvr.Version,
		"kind":    l.kind,
	}
	if l.namespace != "" {
		d["namespace"] = l.namespace
	}
	if l.spelling == spellingControllerRuntime {
		d["source"], d["form"], d["path"] = "controller-runtime", l.source, l.path
		for k, v := range l.filters {
			d[k] = strings.Join(v, ",")
		}
		return d
	}
	d["source"], d["resource"] = l.source, l.gvr.Resource
	for _, s := range selectors {
		if v := l.filters.Get(s.param); v != "" {
			d[s.param] = v
		}
	}
	if l.listerWatcher != nil {
		d["listerWatcher"] = l.listerWatcher.Code
		d["listerWatcherVersion"] = l.listerWatcher.Version
	}
	return d
}
