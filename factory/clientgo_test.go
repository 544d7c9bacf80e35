//lint:file-ignore U1000 the look-alike structs stand in for client-go's, and are read only by reflection

package factory

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// lookalike has the fields of client-go v0.37.2's sharedIndexInformer that
// readSharedIndexInformer reads. Its sharedProcessor and listener have the
// same shape as client-go's. renamedTransform has one of them renamed, as a
// client-go that changed its layout would.
type lookalike struct {
	listerWatcher                   cache.ListerWatcher
	transform                       cache.TransformFunc
	defaultEventHandlerResyncPeriod time.Duration
	objectType                      runtime.Object
	objectDescription               string
	identifier                      cache.InformerNameAndResource
	informerMetricsProvider         cache.InformerMetricsProvider
	watchErrorHandler               cache.WatchErrorHandlerWithContext
	started                         bool
	processor                       *lookalikeProcessor
}

type lookalikeProcessor struct {
	listeners map[*lookalikeListener]bool
}

type lookalikeListener struct {
	handler               cache.ResourceEventHandler
	requestedResyncPeriod time.Duration
	logger                klog.Logger
}

type renamedTransform struct {
	listerWatcher                   cache.ListerWatcher
	transformFunc                   cache.TransformFunc
	defaultEventHandlerResyncPeriod time.Duration
	objectType                      runtime.Object
	objectDescription               string
	identifier                      cache.InformerNameAndResource
	informerMetricsProvider         cache.InformerMetricsProvider
	watchErrorHandler               cache.WatchErrorHandlerWithContext
	started                         bool
	processor                       *lookalikeProcessor
}

// readSharedIndexInformer reads the fields it knows, and reports every
// other layout as errClientGoLayout, naming what it missed; an informer it
// can read but not use is not a layout error.
func TestReadSharedIndexInformerLayout(t *testing.T) {
	lw := &cache.ListWatch{}
	handler := cache.ResourceEventHandlerFuncs{}
	good := &lookalike{listerWatcher: lw, objectType: &runtime.Unknown{}, defaultEventHandlerResyncPeriod: time.Minute,
		processor: &lookalikeProcessor{listeners: map[*lookalikeListener]bool{{handler: handler, requestedResyncPeriod: time.Hour}: true}}}
	p, err := readSharedIndexInformer(reflect.ValueOf(good).Elem())
	if err != nil {
		t.Fatalf("reading v0.37.2's layout: %v", err)
	}
	if p.listerWatcher != lw || p.resync != time.Minute || len(p.handlers) != 1 || p.handlers[0].resync != time.Hour {
		t.Errorf("read %+v", p)
	}

	for name, v := range map[string]interface{}{
		"a renamed field":              &renamedTransform{listerWatcher: lw, objectType: &runtime.Unknown{}},
		"no processor":                 &lookalike{listerWatcher: lw, objectType: &runtime.Unknown{}},
		"a listener without a handler": &lookalike{listerWatcher: lw, objectType: &runtime.Unknown{}, processor: &lookalikeProcessor{listeners: map[*lookalikeListener]bool{{}: true}}},
	} {
		_, err := readSharedIndexInformer(reflect.ValueOf(v).Elem())
		if !errors.Is(err, errClientGoLayout) {
			t.Errorf("%s: %v, want errClientGoLayout", name, err)
		}
		if fallbackReason(err) != fallbackClientGoLayout {
			t.Errorf("%s: reason %q", name, fallbackReason(err))
		}
	}
	if _, err := readSharedIndexInformer(reflect.ValueOf(&renamedTransform{}).Elem()); err == nil || !strings.Contains(err.Error(), "no field transform ") {
		t.Errorf("renamed transform: %v, want it named", err)
	}

	started := *good
	started.started = true
	if _, err := readSharedIndexInformer(reflect.ValueOf(&started).Elem()); err == nil || errors.Is(err, errClientGoLayout) {
		t.Errorf("a started informer: %v, want an error that is not errClientGoLayout", err)
	}
}
