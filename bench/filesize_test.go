package bench

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// sizedPods returns pods of size bytes of protobuf each (within a byte or
// two), padded with an annotation of random letters (so a compressing file
// system could not flatter the figure), totalling about 24 MiB.
func sizedPods(size int) []*corev1.Pod {
	n := 24 << 20 / size
	rng := rand.New(rand.NewSource(int64(size)))
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       fmt.Sprintf("ns-%02d", i%namespaces),
				Name:            fmt.Sprintf("checkout-api-7d9c8b6f5-%06d", i),
				UID:             types.UID(fmt.Sprintf("9f1c2d3e-4b5a-6789-abcd-%012d", i)),
				ResourceVersion: strconv.Itoa(1000 + i),
				Labels:          map[string]string{"app": "checkout-api"},
				Annotations:     map[string]string{"pad": ""},
			},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%500), Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/checkout-api:2.14.3"}}},
		}
		if pad := size - p.Size(); pad > 0 {
			b := make([]byte, pad)
			for j := range b {
				b[j] = 'a' + byte(rng.Intn(26))
			}
			p.Annotations["pad"] = string(b)
			// The annotation's length prefix grew with it: trim to size.
			p.Annotations["pad"] = string(b[:len(b)-(p.Size()-size)])
		}
		out[i] = p
	}
	return out
}

// fileBytes returns the bytes of the closed file at path that hold pages:
// its high-water mark. The file itself is that rounded up to the next 16 MiB
// (bbolt grows files in Options.AllocSize steps once the map is large),
// which at the sizes measured here would hide the difference; at 100,000
// objects the rounding is a few percent.
func fileBytes(b *testing.B, path string) int64 {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkFileSize loads pods of 1, 2, 6 and 10 KB (protobuf) as an
// informer's list does (one Replace in key order), and reports the file's
// size over the pods' protobuf bytes ("file/objects"): after the load, after
// deleting three pods in four, and after persist.Compact of that file.
// BENCH_PAGE_SIZE sets persist.Options.PageSize (default: the package's).
func BenchmarkFileSize(b *testing.B) {
	pageSize := benchPageSize
	for _, kb := range []int{1, 2, 6, 10} {
		b.Run(fmt.Sprintf("objects=%dKB", kb), func(b *testing.B) {
			objs := sizedPods(kb << 10)
			var objBytes int64
			list := make([]interface{}, len(objs))
			for i, o := range objs {
				objBytes += int64(o.Size())
				list[i] = o
			}
			for n := 0; n < b.N; n++ {
				dir := b.TempDir()
				path := filepath.Join(dir, "cache.db")
				db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true, PageSize: pageSize})
				if err != nil {
					b.Fatal(err)
				}
				i, err := bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: "pods", Indexers: indexers})
				if err != nil {
					b.Fatal(err)
				}
				if err := i.Replace(list, "1"); err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				loaded := fileBytes(b, path)
				if db, err = persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true}); err != nil {
					b.Fatal(err)
				}
				if i, err = bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: "pods", Indexers: indexers}); err != nil {
					b.Fatal(err)
				}
				var kept int64
				for k, o := range objs {
					if k%4 == 0 {
						kept += int64(o.Size())
						continue
					}
					if err := i.Delete(o); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				deleted := fileBytes(b, path)
				compact := filepath.Join(dir, "compact.db")
				if _, err := persist.Compact(context.Background(), path, compact, persist.CompactOptions{PageSize: pageSize}); err != nil {
					b.Fatal(err)
				}
				compacted := fileBytes(b, compact)
				b.ReportMetric(float64(loaded)/(1<<20), "file-MiB")
				b.ReportMetric(float64(loaded)/float64(objBytes), "file/objects")
				b.ReportMetric(float64(deleted)/float64(kept), "deleted-file/objects")
				b.ReportMetric(float64(compacted)/float64(kept), "compacted-file/objects")
				b.ReportMetric(float64(objBytes)/(1<<20), "objects-MiB")
				if keep := os.Getenv("BENCH_KEEP_FILES"); keep != "" {
					_ = os.Rename(path, filepath.Join(keep, fmt.Sprintf("deleted-%dKB.db", kb)))
					_ = os.Rename(compact, filepath.Join(keep, fmt.Sprintf("compacted-%dKB.db", kb)))
				}
			}
		})
	}
}
