package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// TestExampleManifestIsAccepted creates every object of the example
// manifest for a controller that keeps its cache file
// (examples/podcounter/deploy) on the real apiserver: the manifest the
// README points to must be one a cluster accepts as written.
func TestExampleManifestIsAccepted(t *testing.T) {
	raw, err := os.ReadFile("../examples/podcounter/deploy/podcounter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := apiservertest.Start(t, apiservertest.Options{})
	cfg := srv.Config()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	kinds := map[string]bool{}
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(context.Background(), &obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("creating %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		kinds[gvk.Kind] = true
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "StatefulSet"} {
		if !kinds[k] {
			t.Errorf("the manifest has no %s", k)
		}
	}
}
