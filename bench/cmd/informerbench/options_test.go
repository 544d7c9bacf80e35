package main

import (
	"strings"
	"testing"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int{"5000": 5000, "10k": 10000, "1.5k": 1500, "100k": 100000, "1m": 1000000} {
		if got, err := benchkit.ParseCount(in); err != nil || got != want {
			t.Errorf("benchkit.ParseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-3", "ten"} {
		if _, err := benchkit.ParseCount(in); err == nil {
			t.Errorf("benchkit.ParseCount(%q) succeeded, want an error", in)
		}
	}
	o := &benchOptions{}
	if err := o.setSizes("100k, 10k,50k"); err != nil || len(o.sizes) != 3 || o.sizes[0] != 10000 || o.sizes[2] != 100000 {
		t.Errorf("setSizes = %v, %v; want [10000 50000 100000]", o.sizes, err)
	}
}

func TestVariantSelection(t *testing.T) {
	o := &benchOptions{}
	if !o.runs(vBoltWarm) || !o.runs(vClientGoProtoList) {
		t.Error("by default every variant runs")
	}
	if err := o.setVariants("bolt-warm, client-go-protobuf-list"); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{vBoltWarm: true, vClientGoProtoList: true, vBoltCold: false, vClientGoProto: false} {
		if o.runs(v) != want {
			t.Errorf("with --variants, runs(%s) = %v, want %v", v, !want, want)
		}
	}
	if err := o.setVariants("bolt-warm,bolt-hot"); err == nil || !strings.Contains(err.Error(), "bolt-hot") {
		t.Errorf("setVariants with an unknown name = %v, want an error naming it", err)
	}
}
