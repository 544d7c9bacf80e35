package main

import (
	"context"
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/recovery"
)

// fullLister has every field factory.NewMetadataLister's REST lister
// sets; its functions are never called here.
func fullLister() *recovery.Lister {
	return &recovery.Lister{
		ListMetadata: func(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return nil, nil
		},
		ListObjects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
			return nil, nil
		},
		ListObjectsWire: func(context.Context, string, metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
			return nil, nil, nil
		},
		ListMetadataWire: func(context.Context, metav1.ListOptions) (io.ReadCloser, error) {
			return nil, nil
		},
		QPS: 5,
	}
}

// Each ablation variant turns off its own layer and keeps every other: the
// tuning it sets, and the Lister fields it keeps. The caller's Lister is
// left whole.
func TestWithoutLayerTurnsOffOneLayer(t *testing.T) {
	for _, variant := range recoverLayerVariants {
		layer := recoverLayers[variant]
		t.Run(layer, func(t *testing.T) {
			full := fullLister()
			rec := &recovery.Options{Lister: full}
			if !withoutLayer(rec, full, layer) {
				t.Fatalf("withoutLayer refused %q", layer)
			}
			l := rec.Lister
			wire, metaWire := l.ListObjectsWire != nil, l.ListMetadataWire != nil
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
			if wire != (layer != "wire-lists") || metaWire != (layer != "metadata-stream") || l.QPS != 5 ||
				l.ListMetadata == nil || l.ListObjects == nil {
				t.Errorf("lister: ListObjectsWire %v, ListMetadataWire %v, QPS %v", wire, metaWire, l.QPS)
			}
			if full.ListObjectsWire == nil || full.ListMetadataWire == nil {
				t.Error("withoutLayer changed the caller's Lister")
			}
		})
	}
	if withoutLayer(&recovery.Options{}, fullLister(), "no-such-layer") {
		t.Error("withoutLayer accepted an unknown layer")
	}
}
