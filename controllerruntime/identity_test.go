package controllerruntime

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The list identity keeps what decides which objects come back and drops
// the reflector's paging and resume parameters; the collection name differs
// whenever the identity or the declared transform version does.
func TestListIdentity(t *testing.T) {
	cm := objectKey{form: formTyped, gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	base := newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&limit=500&resourceVersion=0"))
	if base.namespace != "a" {
		t.Errorf("namespace = %q, want a", base.namespace)
	}
	if got, want := base.collection(""), "typed v1 ConfigMap ns=a labels=app=x"; got[:len(want)] != want {
		t.Errorf("collection = %q, want it to start with %q", got, want)
	}
	same := newListIdentity(cm, parse("https://other/api/v1/namespaces/a/configmaps?resourceVersion=123&continue=abc&labelSelector=app%3Dx&timeoutSeconds=300&watch=true&allowWatchBookmarks=true"))
	if same.String() != base.String() || same.collection("") != base.collection("") {
		t.Errorf("paging and watch parameters changed the identity:\n %s\n %s", same, base)
	}
	names := map[string]string{base.collection(""): "base"}
	for what, name := range map[string]string{
		"other namespace":   newListIdentity(cm, parse("https://h/api/v1/namespaces/b/configmaps?labelSelector=app%3Dx")).collection(""),
		"all namespaces":    newListIdentity(cm, parse("https://h/api/v1/configmaps?labelSelector=app%3Dx")).collection(""),
		"other labels":      newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dy")).collection(""),
		"field selector":    newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&fieldSelector=metadata.name%21%3Dz")).collection(""),
		"other parameter":   newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&resourceVersionMatch=NotOlderThan&shardSelector=1")).collection(""),
		"metadata form":     newListIdentity(objectKey{form: formMetadata, gvk: cm.gvk}, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx")).collection(""),
		"transform version": base.collection("v2"),
	} {
		if prev, ok := names[name]; ok {
			t.Errorf("%s has the collection name of %s: %q", what, prev, name)
		}
		names[name] = what
	}
}
