package controllerruntime_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bcache "github.com/boltinformer/boltinformer/cache"
	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/internal/testing/listidentitytest"
	"github.com/boltinformer/boltinformer/persist"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// The collection names, list identities and descriptions the cache gives
// its informers are stored in cache files: an informer resumes a
// collection only under the same name and list identity. They are pinned
// here so that a change to how they are derived cannot make the files
// already written start cold unnoticed. The namespaces need not exist: only
// the names of their lists matter.
func TestListIdentityGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := boltcr.New(srv.Config(), cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {
				Namespaces: map[string]cache.Config{"golden-a": {}},
				Label:      labels.SelectorFromSet(labels.Set{"app": "web"}),
				Field:      fields.OneTermNotEqualSelector("metadata.name", "x"),
			},
		},
	}, boltcr.Options{
		Path:     path,
		File:     persist.Options{NoSync: true},
		Cluster:  bcache.StaticCluster("test"),
		ByObject: map[client.Object]boltcr.Object{metadataConfigMap(): {TransformVersion: "t1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("cache Start: %v", err)
			}
		}
	}
	defer stop()
	replicaSet := &unstructured.Unstructured{}
	replicaSet.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	deployment := &unstructured.Unstructured{}
	deployment.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	for _, obj := range []client.Object{
		&corev1.ConfigMap{},  // typed, namespaced, all namespaces
		&corev1.Namespace{},  // typed, cluster-scoped
		replicaSet,           // unstructured, API group
		metadataConfigMap(),  // metadata-only, with a transform version
		&appsv1.Deployment{}, // typed, ByObject namespace and selectors
		deployment,           // unstructured, the same ByObject (by GroupVersionKind)
	} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	stop()

	db, err := persist.Open(path, persist.Options{ReadOnly: true, Scheme: boltcr.CodecScheme(scheme.Scheme)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, info := range infos {
		coll, err := db.Collection(info.Name, persist.CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "collection: %s\nlist: %s\ndescription:", info.Name, coll.Provenance()["list"])
		for _, k := range slices.Sorted(maps.Keys(info.Description)) {
			fmt.Fprintf(&b, " %s=%q", k, info.Description[k])
		}
		b.WriteString("\n\n")
	}
	if len(infos) != 6 {
		t.Errorf("%d collections, want one per informer (6)", len(infos))
	}
	listidentitytest.CompareGolden(t, "testdata/list-identity.golden", b.String(), *update)
}
