package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/components/internal/workload"
)

// clusterWatch follows, through client-go informers of the test's own, the
// objects the controller manager scenario looks at, and lets the test wait
// for a state of them.
type clusterWatch struct {
	factory informers.SharedInformerFactory
	// namespaces are the namespaces whose contents make up the state.
	namespaces []string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	changes int           // changes seen so far

	stop context.CancelFunc
	done chan struct{}
}

func watchCluster(t testing.TB, cs kubernetes.Interface, namespaces ...string) *clusterWatch {
	t.Helper()
	w := &clusterWatch{
		factory:    informers.NewSharedInformerFactory(cs, 0),
		namespaces: namespaces,
		changed:    make(chan struct{}),
		done:       make(chan struct{}),
	}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { w.notify() },
		UpdateFunc: func(interface{}, interface{}) { w.notify() },
		DeleteFunc: func(interface{}) { w.notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		w.factory.Core().V1().Namespaces().Informer(),
		w.factory.Apps().V1().Deployments().Informer(),
		w.factory.Apps().V1().ReplicaSets().Informer(),
		w.factory.Core().V1().Pods().Informer(),
		w.factory.Core().V1().ConfigMaps().Informer(),
		w.factory.Core().V1().ServiceAccounts().Informer(),
	} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.factory.Start(ctx.Done())
	go func() {
		defer close(w.done)
		<-ctx.Done()
		w.factory.Shutdown()
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	w.factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *clusterWatch) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes++
	close(w.changed)
	w.changed = make(chan struct{})
}

// next returns the channel closed at the next change and the number of
// changes so far.
func (w *clusterWatch) next() (<-chan struct{}, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed, w.changes
}

// state describes the watched namespaces, one line per fact, sorted:
// the namespaces that exist; each Deployment with its desired replicas;
// each ReplicaSet with its owner Deployment (or "-") and desired replicas;
// the live Pods of each owner ReplicaSet, by the ReplicaSet's owner
// Deployment, counted (Pod names are random); and, if full, also each
// ReplicaSet's name (its pod-template hash is the same wherever the same
// Deployment is created), ConfigMap and ServiceAccount.
func (w *clusterWatch) state(full bool) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	nsLister := w.factory.Core().V1().Namespaces().Lister()
	rsLister := w.factory.Apps().V1().ReplicaSets().Lister()
	for _, ns := range w.namespaces {
		if _, err := nsLister.Get(ns); err != nil {
			continue
		}
		add("namespace %s", ns)
		deps, _ := w.factory.Apps().V1().Deployments().Lister().Deployments(ns).List(labels.Everything())
		for _, d := range deps {
			add("deployment %s/%s replicas=%d", ns, d.Name, *d.Spec.Replicas)
		}
		rss, _ := rsLister.ReplicaSets(ns).List(labels.Everything())
		rsOwner := map[string]string{}
		for _, rs := range rss {
			owner := ownerName(rs.OwnerReferences, "Deployment")
			rsOwner[rs.Name] = owner
			if full {
				add("replicaset %s/%s owner=%s replicas=%d", ns, rs.Name, owner, *rs.Spec.Replicas)
			} else {
				add("replicaset %s/<%s> owner=%s replicas=%d", ns, owner, owner, *rs.Spec.Replicas)
			}
		}
		pods, _ := w.factory.Core().V1().Pods().Lister().Pods(ns).List(labels.Everything())
		count := map[string]int{}
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			key := "owner=-"
			if rs := ownerName(p.OwnerReferences, "ReplicaSet"); rs != "-" {
				key = "replicaset-of=" + rsOwner[rs]
				if full {
					key = "replicaset=" + rs
				}
			} else if len(p.OwnerReferences) > 0 {
				key = "owner=" + p.OwnerReferences[0].Kind + "/" + p.OwnerReferences[0].Name
			}
			count[key]++
		}
		for key, n := range count {
			add("pods %s %s count=%d", ns, key, n)
		}
		if full {
			cms, _ := w.factory.Core().V1().ConfigMaps().Lister().ConfigMaps(ns).List(labels.Everything())
			for _, cm := range cms {
				add("configmap %s/%s", ns, cm.Name)
			}
			sas, _ := w.factory.Core().V1().ServiceAccounts().Lister().ServiceAccounts(ns).List(labels.Everything())
			for _, sa := range sas {
				add("serviceaccount %s/%s", ns, sa.Name)
			}
		}
	}
	sort.Strings(lines)
	return lines
}

func ownerName(refs []metav1.OwnerReference, kind string) string {
	for _, r := range refs {
		if r.Kind == kind && r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return "-"
}

// waitState returns once state(false) equals want; it fails the test
// after timeout, or at once if c exits.
func (w *clusterWatch) waitState(t testing.TB, timeout time.Duration, what string, c *component, want []string) {
	t.Helper()
	w.waitUntil(t, timeout, what, c, want, func(int) bool { return false })
}

// waitChanges returns after n more changes, or once the state is want,
// whichever comes first.
func (w *clusterWatch) waitChanges(t testing.TB, n int, c *component, want []string) {
	t.Helper()
	_, start := w.next()
	w.waitUntil(t, 2*time.Minute, fmt.Sprintf("%d changes", n), c, want, func(seen int) bool { return seen-start >= n })
}

// waitUntil returns once state(false) equals want or enough(changes seen
// so far) holds, checking at every change; it fails the test after
// timeout, or at once if c exits.
func (w *clusterWatch) waitUntil(t testing.TB, timeout time.Duration, what string, c *component, want []string, enough func(changes int) bool) {
	t.Helper()
	sort.Strings(want)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed, seen := w.next()
		got := w.state(false)
		if strings.Join(got, "\n") == strings.Join(want, "\n") || enough(seen) {
			return
		}
		select {
		case <-changed:
		case <-c.exited:
			c.running(t)
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s (%s)\nwant:\n  %s\ngot:\n  %s\n%s", timeout, what, c.name,
				strings.Join(want, "\n  "), strings.Join(got, "\n  "), c.tail(30))
		}
	}
}

// deployment is a Deployment of replicas pending Pods.
func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       workload.PodSpec(),
			},
		},
	}
}
