package persist_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// BenchmarkApplyUpdate applies watch updates one at a time, as an informer
// does, to a collection of 10,000 Pods with one index: each update a Pod
// with a new resourceVersion, its protobuf payload as the watch delivered
// it (Op.Payload) and its index values. It measures the per-event path
// before the group commit: encoding the record and the layer, index and
// object cache. Every 1,000 updates the collection is flushed with the
// timer stopped, as a group commit takes a second's changes.
func BenchmarkApplyUpdate(b *testing.B) {
	const objects, perCommit = 10000, 1000
	db, err := persist.Open(filepath.Join(b.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	coll, err := db.Collection("pods", persist.CollectionOptions{
		Indexes: map[string]string{"namespace": "1"},
		IndexValues: func(_ string, obj runtime.Object) ([]string, error) {
			return []string{obj.(*corev1.Pod).Namespace}, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ops := make([]persist.Op, objects)
	for i := range ops {
		p := fixture.Pod(i)
		p.Namespace = "ns-" + strconv.Itoa(i%50)
		payload, err := p.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		ops[i] = persist.Op{Key: p.Namespace + "/" + p.Name, Object: p, Payload: payload, Indexes: map[string][]string{"namespace": {p.Namespace}}}
	}
	if err := coll.Apply(ops, "1"); err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		op := ops[n%objects]
		op.Indexes = map[string][]string{"namespace": op.Indexes["namespace"]}
		if err := coll.Apply([]persist.Op{op}, strconv.Itoa(2+n)); err != nil {
			b.Fatal(err)
		}
		if n++; n%perCommit == 0 {
			b.StopTimer()
			if err := db.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}
