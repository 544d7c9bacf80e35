package factory_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/recovery"
)

// NewMetadataLister returns nil for a fake clientset, and a controller's
// unit test may pass that straight in. The informer then relists in full,
// as with Recovery nil, rather than failing to build.
func TestNilMetadataListerRelistsInFull(t *testing.T) {
	cs := fake.NewClientset()
	l := factory.NewMetadataLister(cs.CoreV1().RESTClient(), "pods", "", metav1.ListOptions{})
	if l != nil {
		t.Fatalf("NewMetadataLister on a fake clientset = %p, want nil as documented", l)
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", fields.Everything())
	_, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{MemoryOnly: true},
		Recovery:    &recovery.Options{Lister: l},
	})
	if err != nil {
		t.Fatalf("NewSharedIndexInformerWithOptions with NewMetadataLister's documented nil: %v", err)
	}
}
