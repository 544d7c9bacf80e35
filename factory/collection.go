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
}

// newListIdentity applies tweak to empty list options to learn the filters
// it sets.
func newListIdentity(source string, gvr schema.GroupVersionResource, kind, namespace string, tweak func(*metav1.ListOptions)) listIdentity {
	id := listIdentity{source: source, gvr: gvr, kind: kind, namespace: namespace}
	if tweak != nil {
		tweak(&id.options)
	}
	// Paging and resume fields are the reflector's business, not the list's.
	id.options.ResourceVersion, id.options.ResourceVersionMatch = "", ""
	id.options.Limit, id.options.Continue = 0, ""
	id.options.TimeoutSeconds, id.options.Watch, id.options.AllowWatchBookmarks = nil, false, false
	id.options.SendInitialEvents = nil
	return id
}

// collection returns the collection name: readable, and unique per list.
//
//	typed/apps/v1/deployments ns=prod labels=app=web fields=
//
// Options other than the selectors (rare) are folded into a hash.
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
	return d
}
