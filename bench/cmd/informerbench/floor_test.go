package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// writeCacheFile stores pods in a cache file under the collection a bench
// informer with selector uses, as a cold start would leave it.
func writeCacheFile(t *testing.T, selector string, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	idx, err := bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: boltCollection(selector), Indexers: podIndexers})
	if err != nil {
		t.Fatal(err)
	}
	var list []interface{}
	for _, p := range fixturePods(n) {
		list = append(list, &p)
	}
	if err := idx.Replace(list, "100"); err != nil {
		t.Fatal(err)
	}
	if err := idx.Collection().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMeasureFloor decodes a real cache file's records both ways and
// refuses a file that does not hold the expected objects.
func TestMeasureFloor(t *testing.T) {
	const n, sel = 300, "bench.boltinformer.io/set=informerbench"
	path := writeCacheFile(t, sel, n)
	res, err := measureFloor(childSpec{Variant: vFloor, File: path, Selector: sel, Expect: n})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Floor
	if f == nil || f.Objects != n || f.Workers < 1 || len(f.CodecRuns) != floorRuns || len(f.ProtobufRuns) != floorRuns {
		t.Fatalf("floor = %+v, want %d objects and %d runs of each", f, n, floorRuns)
	}
	if f.CodecSeconds <= 0 || f.ProtobufSeconds <= 0 {
		t.Errorf("floor times codec %v s, protobuf %v s: want both positive", f.CodecSeconds, f.ProtobufSeconds)
	}
	if f.CodecFreshSeconds <= 0 {
		t.Errorf("fresh-process codec floor %v s, want positive", f.CodecFreshSeconds)
	}
	if m := res.metrics(); len(m) != 3 || m[mFloorCodec] != f.CodecSeconds || m[mFloorProto] != f.ProtobufSeconds || m[mFloorCodecFresh] != f.CodecFreshSeconds {
		t.Errorf("floor metrics = %v, want only the three floors", m)
	}
	if _, err := measureFloor(childSpec{Variant: vFloor, File: path, Selector: sel, Expect: n + 1}); err == nil || !strings.Contains(err.Error(), "holds 300 records") {
		t.Errorf("floor with the wrong expected count = %v, want an error giving the count", err)
	}
	if _, err := measureFloor(childSpec{Variant: vFloor, File: path, Selector: "other", Expect: n}); err == nil {
		t.Error("floor of a collection the file does not have succeeded")
	}
}

// TestDecodeParallelReportsErrors: a record that does not decode fails the
// floor instead of making it faster.
func TestDecodeParallelReportsErrors(t *testing.T) {
	codec := persist.NewCodec(scheme.Scheme)
	var records [][]byte
	for _, p := range fixturePods(200) {
		rec, err := codec.Encode(&p)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, rec)
	}
	if _, err := decodeParallel(records, codec.Decode); err != nil {
		t.Fatal(err)
	}
	records[150] = []byte("not a record")
	if _, err := decodeParallel(records, codec.Decode); err == nil || !strings.Contains(err.Error(), "object 150") {
		t.Errorf("decodeParallel with a corrupt record = %v, want an error naming object 150", err)
	}
}
