package factory

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// capture reads client-go v0.37.2's sharedIndexInformer fields; this test
// pins them: if client-go renames one, every InformerFor call would fall
// back to memory, and this test says why.
func TestCaptureReadsClientGoInformer(t *testing.T) {
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	marked := func(obj interface{}) (interface{}, error) {
		obj.(*corev1.Pod).Labels = map[string]string{"transformed": "yes"}
		return obj, nil
	}
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer := coreinformers.NewFilteredPodInformer(cs, "team-a", 2*resync, cache.Indexers{"node": cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) {
				o.LabelSelector, o.FieldSelector, o.Limit = "app=web", "spec.nodeName=n1", 7
			})
		_ = informer.SetTransform(marked)
		return informer
	}
	_, gvr, err := resourceOf(&corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.capture(&corev1.Pod{}, gvr, newFunc, time.Minute)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if spec.namespace != "team-a" || spec.options.LabelSelector != "app=web" || spec.options.FieldSelector != "spec.nodeName=n1" {
		t.Errorf("captured namespace %q, options %+v", spec.namespace, spec.options)
	}
	if spec.options.Limit != 0 {
		t.Errorf("captured the page size %d as a filter", spec.options.Limit)
	}
	if spec.resync != 2*time.Minute {
		t.Errorf("captured resync %v, want the constructor's 2m", spec.resync)
	}
	if _, ok := spec.indexers["node"]; !ok || len(spec.indexers) != 1 {
		t.Errorf("captured indexers %v", spec.indexers)
	}
	if spec.transform == nil {
		t.Fatal("transform not captured")
	}
	out, _ := spec.transform(&corev1.Pod{})
	if out.(*corev1.Pod).Labels["transformed"] != "yes" {
		t.Error("captured transform is not the constructor's")
	}
	var opts metav1.ListOptions
	spec.tweak()(&opts)
	if opts.LabelSelector != "app=web" || opts.FieldSelector != "spec.nodeName=n1" {
		t.Errorf("tweak sets %+v", opts)
	}
	if reqs := c.take(); len(reqs) != 0 {
		t.Errorf("%d requests left over", len(reqs))
	}
}

// A wrapper around client-go's informer may change its behaviour, so it is
// not looked through.
func TestCaptureRejectsWrappedInformer(t *testing.T) {
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	type wrapped struct{ cache.SharedIndexInformer }
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return &wrapped{coreinformers.NewPodInformer(cs, "", resync, cache.Indexers{})}
	}
	_, gvr, _ := resourceOf(&corev1.Pod{})
	if _, err := c.capture(&corev1.Pod{}, gvr, newFunc, 0); err == nil || !strings.Contains(err.Error(), "not client-go's shared informer") {
		t.Errorf("capture of a wrapped informer: %v", err)
	}
	// And one for another type than the example object.
	if _, err := c.capture(&corev1.ConfigMap{}, gvr, newFunc, 0); err == nil {
		t.Error("capture accepted an informer of Pods for ConfigMaps")
	}
}

// The list identity stored with a collection differs whenever what is
// listed differs.
func TestListIdentity(t *testing.T) {
	_, pods, _ := resourceOf(&corev1.Pod{})
	base := newListIdentity("typed", pods, "Pod", "", metav1.ListOptions{})
	same := newListIdentity("typed", pods, "Pod", "", metav1.ListOptions{Limit: 500, ResourceVersion: "7", Watch: true})
	if base.String() != same.String() {
		t.Errorf("paging and resume fields change the identity: %s vs %s", base, same)
	}
	for _, other := range []listIdentity{
		newListIdentity("dynamic", pods, "", "", metav1.ListOptions{}),
		newListIdentity("typed", pods, "Pod", "a", metav1.ListOptions{}),
		newListIdentity("typed", pods, "Pod", "", metav1.ListOptions{LabelSelector: "app=web"}),
		newListIdentity("typed", pods, "Pod", "", metav1.ListOptions{FieldSelector: "status.phase!=Failed"}),
	} {
		if other.String() == base.String() {
			t.Errorf("identity %s equals the unfiltered one", other)
		}
	}
}
