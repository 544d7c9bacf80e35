package controllerruntime

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/boltinformer/boltinformer/internal/listidentity"
)

// The list identity keeps what decides which objects come back and drops
// the reflector's paging and resume parameters; the collection name differs
// whenever the identity or the declared transform version does.
func TestListIdentity(t *testing.T) {
	cm := objectKey{form: formTyped, gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}
	newListIdentity := func(object objectKey, u *url.URL) listidentity.List {
		return listidentity.FromRequest(string(object.form), object.gvk, u, "")
	}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	base := newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&limit=500&resourceVersion=0"))
	if base.Namespace() != "a" {
		t.Errorf("namespace = %q, want a", base.Namespace())
	}
	if got, want := base.Collection(), "typed v1 ConfigMap ns=a labels=app=x"; got[:len(want)] != want {
		t.Errorf("collection = %q, want it to start with %q", got, want)
	}
	same := newListIdentity(cm, parse("https://other/api/v1/namespaces/a/configmaps?resourceVersion=123&continue=abc&labelSelector=app%3Dx&timeoutSeconds=300&watch=true&allowWatchBookmarks=true"))
	if same.String() != base.String() || same.Collection() != base.Collection() {
		t.Errorf("paging and watch parameters changed the identity:\n %s\n %s", same, base)
	}
	names := map[string]string{base.Collection(): "base"}
	for what, name := range map[string]string{
		"other namespace":   newListIdentity(cm, parse("https://h/api/v1/namespaces/b/configmaps?labelSelector=app%3Dx")).Collection(),
		"all namespaces":    newListIdentity(cm, parse("https://h/api/v1/configmaps?labelSelector=app%3Dx")).Collection(),
		"other labels":      newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dy")).Collection(),
		"field selector":    newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&fieldSelector=metadata.name%21%3Dz")).Collection(),
		"other parameter":   newListIdentity(cm, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&resourceVersionMatch=NotOlderThan&shardSelector=1")).Collection(),
		"metadata form":     newListIdentity(objectKey{form: formMetadata, gvk: cm.gvk}, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx")).Collection(),
		"transform version": listidentity.FromRequest(string(cm.form), cm.gvk, parse("https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&limit=500&resourceVersion=0"), "v2").Collection(),
	} {
		if prev, ok := names[name]; ok {
			t.Errorf("%s has the collection name of %s: %q", what, prev, name)
		}
		names[name] = what
	}
}
