package factory

import (
	"context"
	"net/url"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// capInPlace caps the watch's timeout at 60 seconds by writing through the
// pointer the reflector passes. The reflector builds fresh options for each
// call, so client-go's informer sends 60 on every watch.
func capInPlace(o *metav1.ListOptions) {
	if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 60 {
		*o.TimeoutSeconds = 60
	}
}

// watchQueries lists then watches through lw with the reflector's options,
// the watch's timeout being timeout, and returns the queries sent.
func watchQueries(t *testing.T, s *scriptServer, lw cache.ListerWatcher, timeout int64) []url.Values {
	ctx := context.Background()
	withCtx := cache.ToListerWatcherWithContext(lw)
	if _, err := withCtx.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500}); err != nil {
		t.Fatal(err)
	}
	w, err := withCtx.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	return s.reset()
}

// wiredFor returns the ListerWatcher the factory builds for a default Pod
// informer of cs with tweak, beside the typed one it wraps.
func wiredFor(t *testing.T, cs kubernetes.Interface, tweak func(*metav1.ListOptions)) (typed, wired cache.ListerWatcher) {
	typed, err := typedListWatch(cs, &corev1.Pod{}, "", tweak)
	if err != nil {
		t.Fatal(err)
	}
	f := &Factory{client: cs}
	f.lock.Lock()
	wired = f.wireListerWatcher(typed, &corev1.Pod{}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, tweakedRequest("", tweak))
	f.lock.Unlock()
	return typed, wired
}

// A tweak that caps the timeout by writing through the pointer also writes
// into the probe it is shown. changesProbes compares against what the probe
// was before, so the change is seen, and the factory's watch keeps the cap.
func TestWireListInPlaceTimeoutCapReachesWatch(t *testing.T) {
	s := emptyPodServer(t)
	typed, wired := wiredFor(t, s.clientset(t), capInPlace)
	want := watchQueries(t, s, typed, 300)
	got := watchQueries(t, s, wired, 300)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a tweak capping timeoutSeconds in place, the factory sent %v, the typed client %v", got, want)
	}
}

// The same through a newFunc: the generated informer's ListerWatcher tweaks
// the capture's probe in place, and the capture sees the change.
func TestCaptureSeesAnInPlaceTimeoutCap(t *testing.T) {
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(cs, "", resync, cache.Indexers{}, capInPlace)
	}
	req, err := c.capture(&corev1.Pod{}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, newFunc, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !req.setsReflectorParams {
		t.Errorf("a newFunc whose tweak caps timeoutSeconds in place: setsReflectorParams = false, want true")
	}
}

// A tweak that writes through a probe's pointer changes that probe only.
// A later tweak capping the timeout at 60 by assignment is still seen.
func TestProbesOutliveAnInPlaceTweak(t *testing.T) {
	if !tweakedRequest("", capByAssignment).setsReflectorParams {
		t.Fatal("capByAssignment is not seen on fresh probes")
	}
	tweakedRequest("", capInPlace)
	if !tweakedRequest("", capByAssignment).setsReflectorParams {
		t.Errorf("after another factory's in-place tweak, capByAssignment is not seen")
	}
}

// capByAssignment caps the watch's timeout at 60 seconds with a new pointer.
func capByAssignment(o *metav1.ListOptions) {
	if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 60 {
		v := int64(60)
		o.TimeoutSeconds = &v
	}
}

// capAt450 caps the watch's timeout at 450 seconds. The reflector sends a
// timeout drawn from [300, 600), so client-go's informer sends a capped one
// about half the time.
func capAt450(o *metav1.ListOptions) {
	if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 450 {
		v := int64(450)
		o.TimeoutSeconds = &v
	}
}

// docs/factory.md: the probes see a tweak that changes a reflector parameter
// "perhaps only for some values, as a cap does". So is a cap inside the
// range of the reflector's watch timeouts.
func TestWireListTimeoutCapAboveTheProbe(t *testing.T) {
	s := emptyPodServer(t)
	typed, wired := wiredFor(t, s.clientset(t), capAt450)
	want := watchQueries(t, s, typed, 500)
	got := watchQueries(t, s, wired, 500)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a tweak capping timeoutSeconds at 450 and a reflector timeout of 500, the factory sent %v, the typed client %v", got, want)
	}
}

// A reflector's watches always carry a timeout, so a tweak may read it.
// The probes are watches as the reflector sends them: building the informer
// does not fail such a tweak on a probe no reflector sends.
func TestProbesAreWatchesAReflectorSends(t *testing.T) {
	readsTimeout := func(o *metav1.ListOptions) {
		if o.AllowWatchBookmarks && *o.TimeoutSeconds > 600 {
			o.TimeoutSeconds = nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("probing a tweak that reads a watch's timeout panicked: %v", r)
		}
	}()
	if tweakedRequest("", readsTimeout).setsReflectorParams {
		t.Error("a tweak that changes no timeout a reflector sends is taken to set reflector parameters")
	}
}
