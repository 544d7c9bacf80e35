package factory_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/listidentitytest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// The collection names, list identities and descriptions the factories
// give their informers are stored in cache files: an informer resumes a
// collection only under the same name and list identity. They are pinned
// here so that a change to how they are derived cannot make the files
// already written start cold unnoticed.
func TestListIdentityGolden(t *testing.T) {
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type informer struct {
		name     string
		informer cache.SharedIndexInformer
	}
	var all []informer
	add := func(name string, inf cache.SharedIndexInformer) { all = append(all, informer{name, inf}) }

	client := fake.NewSimpleClientset()
	plain := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("typed namespaced", plain.Core().V1().Pods().Informer())
	add("typed cluster-scoped", plain.Core().V1().Nodes().Informer())
	add("typed group", plain.Apps().V1().Deployments().Informer())
	add("typed cluster-scoped group", plain.Rbac().V1().ClusterRoles().Informer())

	filtered := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}),
		factory.WithNamespace("prod"),
		factory.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector, o.FieldSelector = "app=web", "metadata.name!=x"
		}))
	add("typed namespace and selectors", filtered.Core().V1().Pods().Informer())
	add("typed cluster-scoped in a namespaced factory", filtered.Core().V1().Nodes().Informer())

	other := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}),
		factory.WithTweakListOptions(func(o *metav1.ListOptions) { o.ShardSelector, o.Limit = "shard-1", 50 }))
	add("typed other list option", other.Apps().V1().Deployments().Informer())

	scheduler := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("typed InformerFor field selector", scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer))

	custom := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test", ListerWatcherVersion: ptr.To("v1")}))
	add("typed InformerFor custom ListerWatcher", custom.InformerFor(&corev1.Pod{}, newGoFilteredPodInformer))

	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList", configMapsResource: "ConfigMapList"})
	dyn := factory.NewDynamicSharedInformerFactory(dc, 0, db, factory.WithDynamicPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("dynamic core", dyn.ForResource(configMapsResource).Informer())
	add("dynamic custom resource", dyn.ForResource(widgets).Informer())
	dynFiltered := factory.NewFilteredDynamicSharedInformerFactory(dc, 0, db, "a",
		func(o *metav1.ListOptions) { o.LabelSelector = "tier in (a,b)" }, factory.WithDynamicPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("dynamic namespace and selector", dynFiltered.ForResource(configMapsResource).Informer())

	mc := newMetadataClient()
	md := factory.NewMetadataSharedInformerFactory(mc, 0, db, factory.WithMetadataPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("metadata", md.ForResource(configMapsResource).Informer())
	mdFiltered := factory.NewFilteredMetadataSharedInformerFactory(mc, 0, db, "a",
		func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=x" }, factory.WithMetadataPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	add("metadata namespace and selector", mdFiltered.ForResource(configMapsResource).Informer())

	defer func() {
		cancel()
		for _, f := range []interface{ Shutdown() }{plain, filtered, other, scheduler, custom, dyn, dynFiltered, md, mdFiltered} {
			f.Shutdown()
		}
	}()
	for _, f := range []interface{ Start(<-chan struct{}) }{plain, filtered, other, scheduler, custom, dyn, dynFiltered, md, mdFiltered} {
		f.Start(ctx.Done())
	}
	for _, inf := range all {
		if !cache.WaitForCacheSync(ctx.Done(), inf.informer.HasSynced) {
			t.Fatalf("%s did not sync", inf.name)
		}
	}

	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	descriptions := map[string]map[string]string{}
	for _, info := range infos {
		descriptions[info.Name] = info.Description
	}
	var b strings.Builder
	for _, inf := range all {
		coll := requirePersistentIndexer(t, inf.informer).Collection()
		fmt.Fprintf(&b, "== %s\ncollection: %s\nlist: %s\ndescription:", inf.name, coll.Name(), coll.Provenance()["list"])
		d := descriptions[coll.Name()]
		for _, k := range slices.Sorted(maps.Keys(d)) {
			fmt.Fprintf(&b, " %s=%q", k, d[k])
		}
		b.WriteString("\n\n")
	}
	listidentitytest.CompareGolden(t, "testdata/list-identity.golden", b.String(), *update)
}
