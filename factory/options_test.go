package factory_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/boltinformer/boltinformer/factory"
)

// PersistenceOptions.MemoryOnly names resources, the same way for the three
// factories: the informers of the named ones never persist, the others do.
// The factory keeps a copy of the options: changing the slice after the
// constructor returned changes nothing.
func TestPersistenceOptionsMemoryOnly(t *testing.T) {
	db := openDB(t)
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	memoryOnly := []schema.GroupVersionResource{deployments, configMapsResource}
	opts := factory.PersistenceOptions{ClusterIdentity: "test", MemoryOnly: memoryOnly}
	typed := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, db, factory.WithPersistence(opts))
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{deployments: "DeploymentList", configMapsResource: "ConfigMapList"})
	dyn := factory.NewDynamicSharedInformerFactory(dc, 0, db, factory.WithDynamicPersistence(opts))
	md := factory.NewMetadataSharedInformerFactory(newMetadataClient(), 0, db, factory.WithMetadataPersistence(opts))
	memoryOnly[0], memoryOnly[1] = schema.GroupVersionResource{}, schema.GroupVersionResource{}
	defer func() { typed.Shutdown(); dyn.Shutdown(); md.Shutdown() }()

	for _, tc := range []struct {
		name       string
		persistent bool
		got        bool
	}{
		{"typed deployments", false, factory.PersistentIndexer(typed.Apps().V1().Deployments().Informer()) != nil},
		{"typed configmaps", false, factory.PersistentIndexer(typed.Core().V1().ConfigMaps().Informer()) != nil},
		{"typed pods", true, factory.PersistentIndexer(typed.Core().V1().Pods().Informer()) != nil},
		{"dynamic configmaps", false, factory.PersistentIndexer(dyn.ForResource(configMapsResource).Informer()) != nil},
		{"dynamic deployments", false, factory.PersistentIndexer(dyn.ForResource(deployments).Informer()) != nil},
		{"dynamic pods", true, factory.PersistentIndexer(dyn.ForResource(podsResource).Informer()) != nil},
		{"metadata configmaps", false, factory.PersistentIndexer(md.ForResource(configMapsResource).Informer()) != nil},
		{"metadata pods", true, factory.PersistentIndexer(md.ForResource(podsResource).Informer()) != nil},
	} {
		if tc.got != tc.persistent {
			t.Errorf("%s: persistent = %v, want %v", tc.name, tc.got, tc.persistent)
		}
	}
}
