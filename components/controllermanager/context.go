/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.

Modifications copyright The boltinformer Authors.
*/

// This file follows k8s.io/kubernetes v1.37.2,
// cmd/kube-controller-manager/app/controllermanager.go: CreateControllerContext,
// which builds client-go's typed and metadata informer factories and gives
// the garbage collector's graph builder the latter; no exported API lets
// another factory in. The change: both factories are boltinformer's, on one
// cache file.

package controllermanager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	garbagecollector "k8s.io/kubernetes/pkg/controller/garbagecollector"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// transformVersion names the transform every persisted object went through
// (the trim below). It is stored with each collection, so a controller
// manager of another release, whose transform may differ, starts cold
// instead of reading objects in another shape.
const transformVersion = "kube-controller-manager v1.37.2: managedFields trimmed"

// createControllerContext is app.CreateControllerContext with the typed and
// metadata informer factories built on db. It also returns the metadata
// factory, whose informers must be shut down before db is closed (the
// context holds it only behind informerfactory.InformerFactory, which has
// no Shutdown).
func createControllerContext(ctx context.Context, s *config.CompletedConfig, rootClientBuilder, clientBuilder clientbuilder.ControllerClientBuilder, db *persist.DB) (app.ControllerContext, *factory.MetadataFactory, error) {
	// Informer transform to trim ManagedFields for memory efficiency.
	trim := func(obj interface{}) (interface{}, error) {
		if accessor, err := meta.Accessor(obj); err == nil {
			if accessor.GetManagedFields() != nil {
				accessor.SetManagedFields(nil)
			}
		}
		return obj, nil
	}

	versionedClient, err := rootClientBuilder.Client("shared-informers")
	if err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to create Kubernetes client for %q: %w", "shared-informers", err)
	}

	informerName, err := cache.NewInformerName("kube-controller-manager")
	if err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to create informer name: %w", err)
	}

	sharedInformers := factory.NewSharedInformerFactoryWithOptions(versionedClient, app.ResyncPeriod(s)(), db,
		factory.WithTransform(trim), factory.WithInformerName(informerName),
		factory.WithPersistence(factory.PersistenceOptions{TransformVersion: transformVersion}))

	metadataConfig, err := rootClientBuilder.Config("metadata-informers")
	if err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to create metadata client config: %w", err)
	}

	metadataClient, err := metadata.NewForConfig(metadataConfig)
	if err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to create metadata client: %w", err)
	}

	metadataInformers := factory.NewMetadataSharedInformerFactoryWithOptions(metadataClient, app.ResyncPeriod(s)(), db,
		factory.WithMetadataTransform(trim), factory.WithMetadataPersistence(factory.PersistenceOptions{TransformVersion: transformVersion}))

	// If apiserver is not running we should wait for some time and fail only then. This is particularly
	// important when we start apiserver and controller manager at the same time.
	if err := genericcontrollermanager.WaitForAPIServer(versionedClient, 10*time.Second); err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to wait for apiserver being healthy: %w", err)
	}

	// Use a discovery client capable of being refreshed.
	discoveryClient, err := rootClientBuilder.DiscoveryClient("controller-discovery")
	if err != nil {
		return app.ControllerContext{}, nil, fmt.Errorf("failed to create discovery client: %w", err)
	}

	cachedClient := cacheddiscovery.NewMemCacheClient(discoveryClient)
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cachedClient)
	go wait.Until(func() {
		restMapper.Reset()
	}, 30*time.Second, ctx.Done())

	controllerContext := app.ControllerContext{
		ClientBuilder:                   clientBuilder,
		InformerFactory:                 sharedInformers,
		ObjectOrMetadataInformerFactory: informerfactory.NewInformerFactory(sharedInformers, metadataInformers),
		ComponentConfig:                 s.ComponentConfig,
		RESTMapper:                      restMapper,
		InformersStarted:                make(chan struct{}),
		ResyncPeriod:                    app.ResyncPeriod(s),
		ControllerManagerMetrics:        controllersmetrics.NewControllerManagerMetrics(kubeControllerManager),
	}

	if controllerContext.ComponentConfig.GarbageCollectorController.EnableGarbageCollector &&
		controllerContext.IsControllerEnabled(app.NewControllerDescriptors()[names.GarbageCollectorController]) {
		ignoredResources := make(map[schema.GroupResource]struct{})
		for _, r := range controllerContext.ComponentConfig.GarbageCollectorController.GCIgnoredResources {
			ignoredResources[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
		}

		controllerContext.GraphBuilder = garbagecollector.NewDependencyGraphBuilder(
			ctx,
			metadataClient,
			controllerContext.RESTMapper,
			ignoredResources,
			controllerContext.ObjectOrMetadataInformerFactory,
			controllerContext.InformersStarted,
		)
	}

	controllersmetrics.Register()
	return controllerContext, metadataInformers, nil
}
