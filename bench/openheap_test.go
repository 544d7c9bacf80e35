package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// openHeapCacheObjects is the decoded-object cache of BenchmarkOpenHeap's
// bounded collection.
const openHeapCacheObjects = 1000

// BenchmarkOpenHeap reports the live heap a bounded collection (a
// 1,000-object cache) holds once opened, at 5,000 and 50,000 objects of
// about 2 KB of which a fifth were last changed by updates the journal
// holds, not the trees: "open-heap-MiB" is the live heap after the open
// minus the live heap before it. A bounded collection's memory must not
// grow with the number of objects, so the two sizes should report about
// the same figure. "journaled" is the objects the journal held.
func BenchmarkOpenHeap(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "cache.db")
			journaled := fillJournaled(b, path, n)
			for range b.N {
				before := liveHeap()
				db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
				if err != nil {
					b.Fatal(err)
				}
				c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: openHeapCacheObjects})
				if err != nil {
					b.Fatal(err)
				}
				after := liveHeap()
				b.ReportMetric(float64(int64(after)-int64(before))/(1<<20), "open-heap-MiB")
				b.ReportMetric(float64(journaled), "journaled")
				runtime.KeepAlive(c)
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fillJournaled creates, at path, a collection of n ConfigMaps of about
// 2 KB listed in one Apply (straight into the trees), then updates every
// fifth of them a few hundred per commit, which the journal takes. It
// returns how many objects the journal holds.
func fillJournaled(b *testing.B, path string, n int) int {
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	data := strings.Repeat("x", 2000)
	obj := func(i, rv int) persist.Op {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%06d", i), ResourceVersion: strconv.Itoa(rv)},
			Data:       map[string]string{"data": data},
		}
		return persist.Op{Key: cm.Namespace + "/" + cm.Name, Object: cm}
	}
	ops := make([]persist.Op, n)
	for i := range ops {
		ops[i] = obj(i, 1)
	}
	if err := c.Apply(ops, "1"); err != nil {
		b.Fatal(err)
	}
	flush := func() {
		if err := c.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	flush()
	ops = ops[:0]
	rv := 2
	for i := 0; i < n; i += 5 {
		ops = append(ops, obj(i, rv))
		if len(ops) == 250 || i+5 >= n {
			if err := c.Apply(ops, strconv.Itoa(rv)); err != nil {
				b.Fatal(err)
			}
			flush()
			ops = ops[:0]
			rv++
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return journalEntries(b, path, "cms")
}

// journalEntries counts the entries of the named collection's journal in
// the closed file at path, and fails unless it is one generation that is
// not being folded.
func journalEntries(b *testing.B, path, collection string) int {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var j format.Journal
	err = db.View(func(tx *bolt.Tx) error {
		var err error
		j, err = format.WalkJournal(tx.Bucket(format.CollectionsBucket).Bucket([]byte(collection)), nil)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(j.Generations) != 1 || j.Folded != nil {
		b.Fatalf("the journal holds generations %v (folded up to %q), want one being appended to", j.Generations, j.Folded)
	}
	return j.Entries[0]
}

// liveHeap returns the live heap after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
