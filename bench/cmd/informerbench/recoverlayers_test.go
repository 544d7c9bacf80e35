package main

import (
	"context"
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/recovery"
)

// fullLister has every capability factory.NewMetadataLister's REST lister
// has; its methods are never called here.
type fullLister struct{}

func (fullLister) ListMetadata(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return nil, nil
}
func (fullLister) ListObjects(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
	return nil, nil
}
func (fullLister) ListObjectsWire(context.Context, string, metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	return nil, nil, nil
}
func (fullLister) ListMetadataWire(context.Context, metav1.ListOptions) (io.ReadCloser, error) {
	return nil, nil
}
func (fullLister) QPS() float32 { return 5 }

// Each ablation variant turns off its own layer and keeps every other: the
// tuning it sets, and the lister interfaces it keeps.
func TestWithoutLayerTurnsOffOneLayer(t *testing.T) {
	for _, variant := range recoverLayerVariants {
		layer := recoverLayers[variant]
		t.Run(layer, func(t *testing.T) {
			rec := &recovery.Recovery{Lister: fullLister{}}
			if !withoutLayer(rec, fullLister{}, layer) {
				t.Fatalf("withoutLayer refused %q", layer)
			}
			_, wire := rec.Lister.(recovery.WireLister)
			_, metaWire := rec.Lister.(recovery.MetadataWireLister)
			_, limited := rec.Lister.(recovery.RateLimitedLister)
			var want recovery.Tuning
			switch layer {
			case "page-ahead":
				want.NoPageAhead = true
			case "first-page":
				want.FirstPageFraction = 2
			}
			if rec.Tuning != want {
				t.Errorf("tuning %+v, want %+v", rec.Tuning, want)
			}
			if wire != (layer != "wire-lists") || metaWire != (layer != "metadata-stream") || !limited {
				t.Errorf("lister %T: WireLister %v, MetadataWireLister %v, RateLimitedLister %v", rec.Lister, wire, metaWire, limited)
			}
		})
	}
	if withoutLayer(&recovery.Recovery{}, fullLister{}, "no-such-layer") {
		t.Error("withoutLayer accepted an unknown layer")
	}
}
