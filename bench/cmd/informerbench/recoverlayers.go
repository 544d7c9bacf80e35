package main

import (
	"context"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/recovery"
)

// A recovery's fast paths, each turned off in its own variant, to measure
// what it buys beside bolt-recover in the same run. Without a named layer
// the recovery is otherwise bolt-recover's.

// recoverLayers names each ablation variant's missing layer.
var recoverLayers = map[string]string{
	"bolt-recover-no-page-ahead":    "page-ahead",
	"bolt-recover-no-first-page":    "first-page",
	"bolt-recover-decoded-metadata": "metadata-stream",
	"bolt-recover-decoded-lists":    "wire-lists",
}

// recoverLayerVariants are recoverLayers' names in the report's order.
var recoverLayerVariants = []string{
	"bolt-recover-no-page-ahead", "bolt-recover-no-first-page",
	"bolt-recover-decoded-metadata", "bolt-recover-decoded-lists",
}

// withoutLayer makes rec recover through lister without the layer named:
// a Tuning field, or a lister that hides the interface the layer reads
// through. It reports false for a lister or layer it cannot do so with.
func withoutLayer(rec *recovery.Recovery, lister recovery.MetadataLister, layer string) bool {
	l, ok := lister.(restLister)
	if !ok {
		return false
	}
	rec.Lister = l
	switch layer {
	case "page-ahead":
		rec.Tuning.NoPageAhead = true
	case "first-page":
		rec.Tuning.FirstPageFraction = 2
	case "metadata-stream":
		// No MetadataWireLister: metadata pages of 500, decoded.
		rec.Lister = wireOnly{l, l}
	case "wire-lists":
		// No WireLister: full lists decoded whole.
		rec.Lister = metadataWireOnly{l, l}
	default:
		return false
	}
	return true
}

// restLister is what factory.NewMetadataLister returns for a REST client.
type restLister interface {
	recovery.WireLister
	recovery.MetadataWireLister
	recovery.RateLimitedLister
}

// wireOnly is a restLister that is no MetadataWireLister: it embeds only
// the RateLimitedLister's methods and adds the full list's.
type wireOnly struct {
	recovery.RateLimitedLister
	l restLister
}

func (w wireOnly) ListObjectsWire(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	return w.l.ListObjectsWire(ctx, namespace, opts)
}

// metadataWireOnly is a restLister that is no WireLister: it embeds only
// the RateLimitedLister's methods and adds the metadata list's.
type metadataWireOnly struct {
	recovery.RateLimitedLister
	l restLister
}

func (w metadataWireOnly) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	return w.l.ListMetadataWire(ctx, opts)
}
