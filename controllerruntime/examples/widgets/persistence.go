package widgets

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
)

// PersistentCache is the operator's one change for a persistent cache: set
// it as manager.Options.NewCache. It declares the version of each field
// index extractor, so a restart reuses the stored indexes; bump a version
// when its extractor changes. It also declares that the Widget API is a
// custom resource (served from etcd, not an aggregated API), so that after
// a 410 the Widget informer, as those of built-in types, recovers by what
// changed instead of listing every Widget.
func PersistentCache(path string) cache.NewCacheFunc {
	return boltcr.NewCache(boltcr.Options{
		Path:          path,
		RecoverGroups: []string{GroupVersion.Group},
		ByObject: map[client.Object]boltcr.Object{
			&corev1.ConfigMap{}: {FieldIndexVersions: map[string]string{OwnerField: "1"}},
			&Widget{}:           {FieldIndexVersions: map[string]string{ServiceField: "1"}},
		},
	})
}

// ownerIndexCalls counts the OwnerField extractor's calls, for the tests
// (a warm restart must not rebuild the index).
var ownerIndexCalls atomic.Int64

func countOwnerIndex() { ownerIndexCalls.Add(1) }

// reconciles counts Reconcile calls per Widget (namespace/name), for the
// tests (a warm restart with a checkpoint reconciles only what changed).
var reconciles sync.Map // string -> *atomic.Int64

func countReconcile(req reconcile.Request) {
	n, _ := reconciles.LoadOrStore(req.String(), new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}
