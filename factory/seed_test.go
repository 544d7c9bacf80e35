package factory_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/boltinformer/boltinformer/factory"
)

// Controller unit tests seed a factory's listers without starting it:
// f.Core().V1().Pods().Informer().GetIndexer().Add(pod), then
// Lister().Get. That works with client-go's factory, and must with ours.
// Started, both list the cluster: the seeded pod, which the cluster lacks,
// is gone from the lister.
func TestListerSeededBeforeStart(t *testing.T) {
	seeded := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seeded", ResourceVersion: "5"}}
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "live"}}
	for name, f := range map[string]informers.SharedInformerFactory{
		"client-go":    informers.NewSharedInformerFactory(fake.NewSimpleClientset(live), 0),
		"boltinformer": factory.NewSharedInformerFactory(fake.NewSimpleClientset(kubeSystem(), live), 0, openDB(t)),
	} {
		t.Run(name, func(t *testing.T) {
			pods := f.Core().V1().Pods()
			if err := pods.Informer().GetIndexer().Add(seeded); err != nil {
				t.Fatal(err)
			}
			if got, err := pods.Lister().Pods("ns").Get("seeded"); err != nil || got.ResourceVersion != "5" {
				t.Errorf("lister Get before Start = %v, %v; want the seeded pod", got, err)
			}
			if got, err := pods.Lister().List(labels.Everything()); err != nil || len(got) != 1 {
				t.Errorf("lister List before Start = %d pods, %v; want the seeded one", len(got), err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer f.Shutdown()
			defer cancel()
			f.Start(ctx.Done())
			for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
				if !ok {
					t.Fatalf("%v did not sync", typ)
				}
			}
			got, err := pods.Lister().List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, p := range got {
				keys = append(keys, p.Namespace+"/"+p.Name)
			}
			sort.Strings(keys)
			if fmt.Sprint(keys) != "[ns/live]" {
				t.Errorf("lister after sync = %v, want the cluster's [ns/live]", keys)
			}
		})
	}
}
