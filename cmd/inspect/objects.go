package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// object is one decoded record.
type object struct {
	Key    string
	Header format.Header
	// Obj is the typed object for types in the scheme, otherwise an
	// *unstructured.Unstructured.
	Obj runtime.Object
	// GVK is the object's API type, filled in from the record and the
	// collection when the object's own TypeMeta is empty (typed informers
	// deliver objects without it).
	GVK schema.GroupVersionKind
	// Meta is the object's metadata; nil if it has none.
	Meta metav1.Object
	// Size is the size of the stored record.
	Size int
}

// decode decodes one record of collection c (nil while c is being
// described). A record of a type the scheme does not know decodes as
// unstructured when it was stored as JSON; as protobuf it cannot be
// decoded and the error wraps persist.ErrUnknownType.
func (f *cacheFile) decode(c *collection, key string, rec []byte) (*object, error) {
	h, payload, err := format.ReadHeader(rec)
	if err != nil {
		return nil, err
	}
	obj, err := f.codec.Decode(rec)
	if errors.Is(err, persist.ErrUnknownType) && h.Encoding == format.EncodingJSON {
		content := map[string]any{}
		if jerr := utiljson.Unmarshal(payload, &content); jerr != nil {
			return nil, fmt.Errorf("%w: %s payload: %v", persist.ErrCorruptRecord, h.Type, jerr)
		}
		obj, err = &unstructured.Unstructured{Object: content}, nil
	}
	if err != nil {
		return nil, err
	}
	o := &object{Key: key, Header: h, Obj: obj, Size: len(rec)}
	o.GVK = f.kindOf(c, h, obj)
	if m, merr := meta.Accessor(obj); merr == nil {
		o.Meta = m
	}
	return o, nil
}

// kindOf returns obj's API type: its TypeMeta, else the scheme's name for its
// Go type, else the record's type, else what the collection holds.
func (f *cacheFile) kindOf(c *collection, h format.Header, obj runtime.Object) schema.GroupVersionKind {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" {
		return gvk
	}
	if _, isU := obj.(*unstructured.Unstructured); !isU {
		if kinds, _, err := f.scheme.ObjectKinds(obj); err == nil && len(kinds) > 0 {
			return kinds[0]
		}
	}
	if g, ok := parseGVK(h.Type); ok {
		return g
	}
	if c != nil && c.Kind != "" {
		return schema.GroupVersionKind{Group: c.Group, Version: c.Version, Kind: c.Kind}
	}
	return gvk
}

// parseGVK inverts schema.GroupVersionKind.String ("apps/v1, Kind=Deployment",
// "/v1, Kind=Pod"), the form of format.Header.Type.
func parseGVK(s string) (schema.GroupVersionKind, bool) {
	gv, kind, ok := strings.Cut(s, ", Kind=")
	if !ok || kind == "" {
		return schema.GroupVersionKind{}, false
	}
	group, version, ok := strings.Cut(gv, "/")
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, true
}

// Name and Namespace come from the object's metadata, or from its key.
func (o *object) Name() string {
	if o.Meta != nil {
		return o.Meta.GetName()
	}
	if _, name, ok := strings.Cut(o.Key, "/"); ok {
		return name
	}
	return o.Key
}

func (o *object) Namespace() string {
	if o.Meta != nil {
		return o.Meta.GetNamespace()
	}
	if ns, _, ok := strings.Cut(o.Key, "/"); ok {
		return ns
	}
	return ""
}

func (o *object) Labels() map[string]string {
	if o.Meta == nil {
		return nil
	}
	return o.Meta.GetLabels()
}

// contentOptions say how an object becomes a map for YAML, JSON, export and
// diff.
type contentOptions struct {
	// showSecrets keeps Secret data; otherwise it is redacted.
	showSecrets bool
	// stripServerFields drops the metadata the apiserver sets, so that the
	// result can be applied to a cluster.
	stripServerFields bool
}

// content returns the object as a JSON-shaped map the caller owns, with
// apiVersion and kind set.
func (o *object) content(opts contentOptions) (map[string]any, error) {
	m, err := o.rawContent()
	if err != nil {
		return nil, err
	}
	if !opts.showSecrets && isSecret(o.GVK) {
		redactSecret(m)
	}
	if opts.stripServerFields {
		stripServerFields(m)
	}
	return m, nil
}

// rawContent is content with nothing redacted or stripped.
func (o *object) rawContent() (map[string]any, error) {
	var m map[string]any
	if u, ok := o.Obj.(*unstructured.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.Object)
	} else {
		data, err := json.Marshal(o.Obj)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", o.Key, err)
		}
		if err := utiljson.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("key %q: %w", o.Key, err)
		}
	}
	if s, _ := m["apiVersion"].(string); s == "" && !o.GVK.Empty() {
		m["apiVersion"] = o.GVK.GroupVersion().String()
	}
	if s, _ := m["kind"].(string); s == "" && o.GVK.Kind != "" {
		m["kind"] = o.GVK.Kind
	}
	return m, nil
}

func isSecret(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// lastApplied is the annotation kubectl apply writes: on a Secret it holds
// the data in the clear.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func redacted(n int) string { return fmt.Sprintf("<redacted: %d bytes>", n) }

// redactSecret replaces every value of a Secret's data and stringData, and
// its last-applied-configuration annotation, with its size.
func redactSecret(m map[string]any) {
	if data, ok := m["data"].(map[string]any); ok {
		for k, v := range data {
			s, _ := v.(string)
			n := len(s)
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				n = len(b)
			}
			data[k] = redacted(n)
		}
	}
	if data, ok := m["stringData"].(map[string]any); ok {
		for k, v := range data {
			s, _ := v.(string)
			data[k] = redacted(len(s))
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			if s, ok := ann[lastApplied].(string); ok {
				ann[lastApplied] = redacted(len(s))
			}
		}
	}
}

// serverFields are the metadata fields the apiserver owns; an object that
// carries them cannot be created, and applies only over the exact version.
var serverFields = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
}

func stripServerFields(m map[string]any) {
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, f := range serverFields {
		delete(md, f)
	}
}
