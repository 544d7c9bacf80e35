package podcounter_test

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/examples/podcounter"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// The controller counts Pods, writes summaries and deletes a stale one, on
// client-go's factory and on boltinformer's alike.
func TestController(t *testing.T) {
	for _, tc := range []struct {
		name       string
		newFactory func(t *testing.T, client kubernetes.Interface) informers.SharedInformerFactory
	}{
		{"client-go", func(_ *testing.T, client kubernetes.Interface) informers.SharedInformerFactory {
			return informers.NewSharedInformerFactory(client, 0)
		}},
		{"boltinformer", func(t *testing.T, client kubernetes.Interface) informers.SharedInformerFactory {
			db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() }) // after the factory's Shutdown, registered later
			// A fake clientset has no kube-system namespace whose UID would
			// identify the cluster; declare one instead.
			return factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "fake-clientset"}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(
				newPod("a", "p1", corev1.PodRunning),
				newPod("a", "p2", corev1.PodRunning),
				newPod("a", "p3", corev1.PodPending),
				newPod("b", "p1", corev1.PodFailed),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: podcounter.SummaryName}, Data: map[string]string{"Running": "1"}},
			)
			f := tc.newFactory(t, client)
			c, err := podcounter.New(client, f)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			done := make(chan error, 1)
			f.Start(ctx.Done())
			go func() { done <- c.Run(ctx, 2) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
				f.Shutdown()
			})

			want := podcounter.Counts{
				"a": {corev1.PodRunning: 2, corev1.PodPending: 1},
				"b": {corev1.PodFailed: 1},
			}
			wantSummaries := map[string]map[string]string{"a": {"Running": "2", "Pending": "1"}, "b": {"Failed": "1"}}
			var summaries map[string]map[string]string
			err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				summaries = map[string]map[string]string{}
				cms, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for _, cm := range cms.Items {
					if cm.Name == podcounter.SummaryName {
						summaries[cm.Namespace] = maps.Clone(cm.Data)
					}
				}
				return reflect.DeepEqual(c.Counts(), want) && reflect.DeepEqual(summaries, wantSummaries), nil
			})
			if err != nil {
				t.Fatalf("counts %v, want %v; summaries %v, want %v", c.Counts(), want, summaries, wantSummaries)
			}
		})
	}
}

func newPod(ns, name string, phase corev1.PodPhase) runtime.Object {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status:     corev1.PodStatus{Phase: phase},
	}
}
