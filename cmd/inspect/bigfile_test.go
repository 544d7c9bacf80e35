package main

import (
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

var (
	bigFile    = flag.String("inspect.bigfile", "", "write a cache file of -inspect.bigcount fixture Pods at this path (for timing inspect on it), then exit")
	bigCount   = flag.Int("inspect.bigcount", 100_000, "number of Pods -inspect.bigfile writes")
	namespaces = 50
)

// TestWriteBigFile writes a large cache file the way an informer's initial
// list does (one Replace through cache.NewIndexer) when -inspect.bigfile is
// given:
//
//	cd cmd/inspect
//	go test . -run TestWriteBigFile -inspect.bigfile /tmp/pods.db
//	go build -o /tmp/inspect . && time /tmp/inspect ls /tmp/pods.db
func TestWriteBigFile(t *testing.T) {
	if *bigFile == "" {
		t.Skip("no -inspect.bigfile")
	}
	start := time.Now()
	db, err := persist.Open(*bigFile, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bcache.NewIndexer(bcache.IndexerOptions{
		DB:          db,
		Collection:  "typed/v1/pods",
		Description: map[string]string{"source": "typed", "resource": "pods", "version": "v1", "kind": "Pod"},
		Indexers:    cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, "node": podNodeIndexFunc},
	})
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, *bigCount)
	for i := range list {
		p := fixture.Pod(i)
		p.Namespace = fmt.Sprintf("team-%02d", i%namespaces)
		list[i] = p
	}
	last := list[len(list)-1].(*corev1.Pod).ResourceVersion
	if err := idx.Replace(list, last); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d pods to %s in %v", len(list), *bigFile, time.Since(start))
}
