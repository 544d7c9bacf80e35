package podcounter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	// SummaryName is the name of the ConfigMap the controller keeps in every
	// namespace that has Pods.
	SummaryName = "pod-summary"
	// ManagedByLabel is set to "podcounter" on every summary.
	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// Counts maps a namespace to its number of Pods per phase. Namespaces
// without Pods are absent.
type Counts map[string]map[corev1.PodPhase]int

// Controller counts Pods per namespace and phase; see the package doc.
type Controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string] // namespaces

	// mu guards counts.
	mu     sync.Mutex
	counts Counts
}

// New builds a controller on f's Pod and ConfigMap informers. Call it before
// f.Start, so that the factory starts those informers.
func New(client kubernetes.Interface, f informers.SharedInformerFactory) (*Controller, error) {
	pods := f.Core().V1().Pods()
	configMaps := f.Core().V1().ConfigMaps()
	c := &Controller{
		client:     client,
		pods:       pods.Lister(),
		configMaps: configMaps.Lister(),
		synced:     []cache.InformerSynced{pods.Informer().HasSynced, configMaps.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "podcounter"}),
		counts: Counts{},
	}
	// Every change to a Pod may change its namespace's counts.
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueNamespace,
		UpdateFunc: func(_, obj interface{}) { c.enqueueNamespace(obj) },
		DeleteFunc: c.enqueueNamespace,
	}); err != nil {
		return nil, err
	}
	// A summary changed or deleted by someone else is repaired, and a stale
	// summary seen at start (all the namespace's Pods went away) is deleted.
	if _, err := configMaps.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: isSummary,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueNamespace,
			UpdateFunc: func(_, obj interface{}) { c.enqueueNamespace(obj) },
			DeleteFunc: c.enqueueNamespace,
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func isSummary(obj interface{}) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	return ok && cm.Name == SummaryName
}

// enqueueNamespace queues the namespace of obj, which may be a tombstone.
func (c *Controller) enqueueNamespace(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	namespace, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(namespace)
}

// Counts returns a copy of the counts processed so far.
func (c *Controller) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(Counts, len(c.counts))
	for ns, phases := range c.counts {
		out[ns] = maps.Clone(phases)
	}
	return out
}

// Run waits for the informers to sync, then processes namespaces on workers
// goroutines until ctx is done. It returns once every worker has stopped.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		c.queue.ShutDown()
		return errors.New("podcounter: informers did not sync")
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for c.processNextItem(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	c.queue.ShutDown() // Get returns shutdown=true once the queue drains: workers return.
	wg.Wait()
	return nil
}

func (c *Controller) processNextItem(ctx context.Context) bool {
	namespace, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(namespace)
	if err := c.sync(ctx, namespace); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing namespace", "namespace", namespace)
		c.queue.AddRateLimited(namespace)
		return true
	}
	c.queue.Forget(namespace)
	return true
}

// sync recounts namespace's Pods and brings its summary to the counts.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	pods, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	phases := map[corev1.PodPhase]int{}
	for _, pod := range pods {
		phase := pod.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		phases[phase]++
	}
	c.mu.Lock()
	if len(phases) == 0 {
		delete(c.counts, namespace)
	} else {
		c.counts[namespace] = phases
	}
	c.mu.Unlock()

	summary, err := c.configMaps.ConfigMaps(namespace).Get(SummaryName)
	switch {
	case apierrors.IsNotFound(err):
		summary = nil
	case err != nil:
		return err
	}
	if len(phases) == 0 {
		if summary == nil {
			return nil
		}
		err := c.client.CoreV1().ConfigMaps(namespace).Delete(ctx, SummaryName, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &summary.UID},
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	want := SummaryData(phases)
	if summary == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: SummaryName, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "podcounter"}},
			Data:       want,
		}
		_, err := c.client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err // AlreadyExists: the lister is behind; the retry sees the summary
	}
	if maps.Equal(summary.Data, want) && summary.Labels[ManagedByLabel] == "podcounter" {
		return nil
	}
	summary = summary.DeepCopy() // lister objects are shared and read-only
	summary.Data = want
	if summary.Labels == nil {
		summary.Labels = map[string]string{}
	}
	summary.Labels[ManagedByLabel] = "podcounter"
	if _, err := c.client.CoreV1().ConfigMaps(namespace).Update(ctx, summary, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating %s/%s: %w", namespace, SummaryName, err)
	}
	return nil
}

// SummaryData is the content of a summary for the given counts: one key per
// phase with Pods, the count in decimal.
func SummaryData(phases map[corev1.PodPhase]int) map[string]string {
	data := make(map[string]string, len(phases))
	for phase, n := range phases {
		if n > 0 {
			data[string(phase)] = strconv.Itoa(n)
		}
	}
	return data
}
