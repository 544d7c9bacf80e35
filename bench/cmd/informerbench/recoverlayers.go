package main

import "github.com/boltinformer/boltinformer/recovery"

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

// withoutLayer makes rec recover through a copy of lister without the
// layer named: a Tuning field, or a Lister field set to nil. It reports
// false for a layer it does not know, or a lister without both wire forms.
func withoutLayer(rec *recovery.Options, lister *recovery.Lister, layer string) bool {
	if lister == nil || lister.ListMetadataWire == nil || lister.ListObjectsWire == nil {
		return false
	}
	l := *lister
	switch layer {
	case "page-ahead":
		rec.Tuning.NoPageAhead = true
	case "first-page":
		rec.Tuning.FirstPageFraction = 2
	case "metadata-stream":
		// No metadata list's wire form: pages of 500, decoded.
		l.ListMetadataWire = nil
	case "wire-lists":
		// No full list's wire form: full lists decoded whole.
		l.ListObjectsWire = nil
	default:
		return false
	}
	rec.Lister = &l
	return true
}
