package factory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// listIdentity is what makes two informers list the same objects: the
// resource, the namespace and whatever the tweak function sets on the list
// options. It names the informer's collection, so a factory with other
// filters, or a changed selector, never resumes another list's state.
type listIdentity struct {
	source    string // "typed" or "dynamic": typed and unstructured objects are stored apart
	gvr       schema.GroupVersionResource
	kind      string
	namespace string // the factory's namespace; "" for all namespaces
	options   metav1.ListOptions
	// listerWatcher identifies a ListerWatcher that may filter or rewrite
	// objects in Go (not client-go's own); nil for client-go's, whose list
	// is exactly the request.
	listerWatcher *listerWatcherIdentity
}

// listerWatcherIdentity identifies a ListerWatcher's Go code: the names of
// its functions (listerWatcherCode) and the version declared for it
// (WithListerWatcherVersion). Go names cannot see what a closure closes
// over, nor a changed body, so the declared version is what vouches for the
// code; a changed name still starts cold.
type listerWatcherIdentity struct {
	Code    string `json:"code"`
	Version string `json:"version"`
}

// withListerWatcher returns id for a list made through a custom
// ListerWatcher.
func (id listIdentity) withListerWatcher(code, version string) listIdentity {
	id.listerWatcher = &listerWatcherIdentity{Code: code, Version: version}
	return id
}

// newListIdentity returns the identity of a list with options opts (only
// its filters count: paging, resume and watch fields are dropped).
func newListIdentity(source string, gvr schema.GroupVersionResource, kind, namespace string, opts metav1.ListOptions) listIdentity {
	opts = listFilters(opts)
	return listIdentity{source: source, gvr: gvr, kind: kind, namespace: namespace, options: opts}
}

// tweakedOptions returns the list options tweak sets on empty ones.
func tweakedOptions(tweak func(*metav1.ListOptions)) metav1.ListOptions {
	var opts metav1.ListOptions
	if tweak != nil {
		tweak(&opts)
	}
	return opts
}

// String is the list identity stored with the collection
// (cache.Persistence.ListIdentity): every field, in a fixed order.
func (id listIdentity) String() string {
	raw, _ := json.Marshal(struct {
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
		ListerWatcher *listerWatcherIdentity `json:"listerWatcher,omitempty"`
	}{id.source, id.gvr.Group, id.gvr.Version, id.gvr.Resource, id.kind, id.namespace, id.options, id.listerWatcher})
	return string(raw)
}

// collection returns the collection name: readable, and unique per list.
//
//	typed/apps/v1/deployments ns=prod labels=app=web fields=
//
// Options other than the selectors (rare) are folded into a hash. A list
// through a custom ListerWatcher gets " listwatch=custom": it never shares
// a collection with the plain list of the same request. Its code and
// version are not in the name but in the ListIdentity, so a changed version
// (or a closure renamed by a refactoring) starts the same collection cold
// instead of leaving the old one behind in the file.
func (id listIdentity) collection() string {
	var b strings.Builder
	b.WriteString(id.source)
	b.WriteByte('/')
	if id.gvr.Group != "" {
		b.WriteString(id.gvr.Group)
		b.WriteByte('/')
	}
	b.WriteString(id.gvr.Version)
	b.WriteByte('/')
	b.WriteString(id.gvr.Resource)
	if id.namespace != "" {
		b.WriteString(" ns=" + id.namespace)
	}
	if id.options.LabelSelector != "" {
		b.WriteString(" labels=" + id.options.LabelSelector)
	}
	if id.options.FieldSelector != "" {
		b.WriteString(" fields=" + id.options.FieldSelector)
	}
	rest := id.options
	rest.LabelSelector, rest.FieldSelector = "", ""
	if raw, _ := json.Marshal(rest); string(raw) != "{}" {
		sum := sha256.Sum256(raw)
		b.WriteString(" options=" + hex.EncodeToString(sum[:6]))
	}
	if id.listerWatcher != nil {
		b.WriteString(" listwatch=custom")
	}
	return b.String()
}

// description is what tools such as inspect show for the collection.
func (id listIdentity) description() map[string]string {
	d := map[string]string{
		"source":   id.source,
		"group":    id.gvr.Group,
		"version":  id.gvr.Version,
		"resource": id.gvr.Resource,
		"kind":     id.kind,
	}
	if id.namespace != "" {
		d["namespace"] = id.namespace
	}
	if id.options.LabelSelector != "" {
		d["labelSelector"] = id.options.LabelSelector
	}
	if id.options.FieldSelector != "" {
		d["fieldSelector"] = id.options.FieldSelector
	}
	if id.listerWatcher != nil {
		d["listerWatcher"] = id.listerWatcher.Code
		d["listerWatcherVersion"] = id.listerWatcher.Version
	}
	return d
}
