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

// newPodInformer follows k8s.io/kubernetes v1.37.2, pkg/scheduler/scheduler.go
// (newPodInformer, unexported), and newInformerFactories follows the same
// file's NewInformerFactory and cmd/kube-scheduler/app/options/options.go
// (Options.Config), with boltinformer's factories in place of client-go's.

package scheduler

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// transformVersion names the transform every persisted Pod went through
// (newPodInformer's trim). It is stored with the collection, so a scheduler
// of another release, whose transform may differ, starts cold instead of
// reading objects in another shape.
const transformVersion = "kube-scheduler v1.37.2: managedFields trimmed"

// newInformerFactories returns the scheduler's typed factory, with its
// non-terminal Pod informer registered as scheduler.NewInformerFactory
// registers it, and its dynamic factory, both keeping their informers in
// db.
func newInformerFactories(client clientset.Interface, kubeConfig *restclient.Config, db *persist.DB, informerName *cache.InformerName) (informers.SharedInformerFactory, dynamicinformer.DynamicSharedInformerFactory, error) {
	typed := factory.NewSharedInformerFactoryWithOptions(client, 0, db,
		factory.WithInformerName(informerName),
		factory.WithPersistence(factory.PersistenceOptions{TransformVersion: transformVersion}))
	typed.InformerFor(&v1.Pod{}, func(cs clientset.Interface, resyncPeriod time.Duration) cache.SharedIndexInformer {
		return newPodInformer(cs, resyncPeriod, informerName)
	})

	dynClient, err := dynamic.NewForConfig(kubeConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	dyn := factory.NewFilteredDynamicSharedInformerFactory(dynClient, 0, db, v1.NamespaceAll, nil)
	return typed, dyn, nil
}

// newPodInformer creates a shared index informer that returns only non-terminal pods.
// The PodInformer allows indexers to be added, but note that only non-conflict indexers are allowed.
func newPodInformer(cs clientset.Interface, resyncPeriod time.Duration, informerName *cache.InformerName) cache.SharedIndexInformer {
	selector := fmt.Sprintf("status.phase!=%v,status.phase!=%v", v1.PodSucceeded, v1.PodFailed)
	tweakListOptions := func(options *metav1.ListOptions) {
		options.FieldSelector = selector
	}
	informer := coreinformers.NewPodInformerWithOptions(cs, metav1.NamespaceAll, internalinterfaces.InformerOptions{
		ResyncPeriod:     resyncPeriod,
		Indexers:         cache.Indexers{},
		TweakListOptions: tweakListOptions,
		InformerName:     informerName,
	})

	// Dropping `.metadata.managedFields` to improve memory usage.
	// The Extract workflow (i.e. `ExtractPod`) should be unused.
	trim := func(obj interface{}) (interface{}, error) {
		if accessor, err := meta.Accessor(obj); err == nil {
			if accessor.GetManagedFields() != nil {
				accessor.SetManagedFields(nil)
			}
		}
		return obj, nil
	}
	informer.SetTransform(trim)
	return informer
}
