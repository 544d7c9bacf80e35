package persist_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/runstats"
	"github.com/boltinformer/boltinformer/persist"
)

// BenchmarkChurn measures what a steady churn of updates costs the file:
// BENCH_OBJECTS ConfigMaps (default 10,000) of about BENCH_RECORD_BYTES
// (default 6,000, a realistic Pod's protobuf) are loaded as a list is, then
// each op updates one of them, with a group commit every
// BENCH_UPDATES_PER_COMMIT updates (default 100: a second of a 100/s
// churn). Keys are drawn uniformly (the worst case for the journal) or from
// a Zipf distribution of exponent 1.1 over a fixed permutation of the keys
// (a few objects change often). Two indexes are kept, as the informer
// churn keeps. Reported per update:
//
//   - written-B/update: bytes the process wrote (wchar of /proc/self/io);
//   - written/record: that over the mean record;
//   - cpu-ns/update: process CPU time;
//   - file/records: the file's high-water mark over the records' bytes at
//     the end. bbolt never lowers the mark, so that is the largest the file
//     was.
//
// BENCH_JOURNAL_SHARE sets persist.Options.JournalShare. Run enough updates
// to fold the journal several times: at the default share about three
// times the objects (-benchtime=30000x at 10,000 objects).
func BenchmarkChurn(b *testing.B) {
	objects := envInt("BENCH_OBJECTS", 10000)
	size := envInt("BENCH_RECORD_BYTES", 6000)
	perCommit := envInt("BENCH_UPDATES_PER_COMMIT", 100)
	share, _ := strconv.ParseFloat(os.Getenv("BENCH_JOURNAL_SHARE"), 64)
	for _, skew := range []string{"uniform", "zipf"} {
		b.Run(fmt.Sprintf("objects=%d/keys=%s", objects, skew), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "cache.db")
			db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: time.Hour, BatchLimit: 1 << 30, JournalShare: share})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			c, err := db.Collection("cms", persist.CollectionOptions{
				Indexes:     map[string]string{"namespace": "v1", "app": "v1"},
				IndexValues: churnIndexValues,
			})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			pad := make([]byte, size)
			for i := range pad {
				pad[i] = 'a' + byte(rng.Intn(26))
			}
			ops := make([]persist.Op, objects)
			for i := range ops {
				ops[i] = churnOp(i, 1, string(pad))
			}
			if err := c.Apply(ops, "1"); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := db.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			next := func() int { return rng.Intn(objects) }
			if skew == "zipf" {
				z := rand.NewZipf(rng, 1.1, 1, uint64(objects-1))
				perm := rng.Perm(objects)
				next = func() int { return perm[z.Uint64()] }
			}
			keys := make([]int, b.N)
			for n := range keys {
				keys[n] = next()
			}
			records, err := recordBytes(c)
			if err != nil {
				b.Fatal(err)
			}
			w0, cpu0 := churnWritten(), runstats.SelfCPU()
			b.ResetTimer()
			for n, i := range keys {
				if err := c.Apply([]persist.Op{churnOp(i, 2+n, string(pad))}, strconv.Itoa(2+n)); err != nil {
					b.Fatal(err)
				}
				if (n+1)%perCommit == 0 || n == len(keys)-1 {
					if err := db.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			cpu, written := runstats.SelfCPU()-cpu0, churnWritten()-w0
			end := persist.FileHighWater(db)
			b.ReportMetric(float64(written)/float64(b.N), "written-B/update")
			b.ReportMetric(float64(written)/float64(b.N)/(float64(records)/float64(objects)), "written/record")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/update")
			b.ReportMetric(float64(end)/float64(records), "file/records")
		})
	}
}

// churnOp returns the op that writes object i at resourceVersion rv.
func churnOp(i, rv int, pad string) persist.Op {
	ns := fmt.Sprintf("ns-%02d", i%20)
	app := fmt.Sprintf("app-%03d", i%300)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("checkout-api-7d9c8b6f5-%06d", i),
			UID:             types.UID(fmt.Sprintf("9f1c2d3e-4b5a-6789-abcd-%012d", i)),
			ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{"app": app},
		},
		Data: map[string]string{"pad": pad},
	}
	return persist.Op{Key: ns + "/" + cm.Name, Object: cm, Indexes: map[string][]string{"namespace": {ns}, "app": {app}}}
}

func churnIndexValues(index string, obj runtime.Object) ([]string, error) {
	cm := obj.(*corev1.ConfigMap)
	if index == "namespace" {
		return []string{cm.Namespace}, nil
	}
	return []string{cm.Labels["app"]}, nil
}

// recordBytes returns the bytes of c's records.
func recordBytes(c *persist.Collection) (int64, error) {
	_, n, err := persist.TreeBytes(c)
	return n, err
}

// churnWritten is what the process has written so far (wchar of
// /proc/self/io), or 0 where that is not available.
func churnWritten() int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return n
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
