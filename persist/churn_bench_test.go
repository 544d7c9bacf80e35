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

	"github.com/boltinformer/boltinformer/internal/bench/runstats"
	"github.com/boltinformer/boltinformer/persist"
)

// BenchmarkChurn measures what a steady churn costs the file: BENCH_OBJECTS
// ConfigMaps (default 10,000) of about BENCH_RECORD_BYTES (default 6,000, a
// realistic Pod's protobuf) are loaded as a list is. Then each op makes one
// change, as informerbench's churn does (churnSteps): 80% updates, 10%
// creations, 10% deletions. A group commit follows every
// BENCH_UPDATES_PER_COMMIT changes (default 100: a second of a 100/s
// churn). Updates pick objects uniformly (the worst case for the journal)
// or by a Zipf law of exponent 1.1 (a few objects change often). Two
// indexes are kept, as the informer churn keeps. Reported per change:
//
//   - written-B/change: bytes the process wrote (wchar of /proc/self/io);
//   - written/record: that over the mean record;
//   - cpu-ns/change: process CPU time;
//   - file/records: the file's high-water mark over the records' bytes at
//     the end. bbolt never lowers the mark, so that is the largest the file
//     was.
//
// BENCH_JOURNAL_SHARE sets persist.Options.JournalShare. Run enough changes
// to fold the journal several times: ten times the objects
// (-benchtime=100000x at 10,000 objects) folds it about six times at a
// share of 1. Records keep their size, and the objects their number, so
// file/records is given over the records loaded.
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
			steps := churnSteps(rng, b.N, objects, skew == "zipf")
			records, err := recordBytes(c)
			if err != nil {
				b.Fatal(err)
			}
			w0, cpu0 := churnWritten(), runstats.SelfCPU()
			b.ResetTimer()
			for n, st := range steps {
				op := persist.Op{Key: churnKey(st.i), Delete: true}
				if !st.delete {
					op = churnOp(st.i, 2+n, string(pad))
				}
				if err := c.Apply([]persist.Op{op}, strconv.Itoa(2+n)); err != nil {
					b.Fatal(err)
				}
				if (n+1)%perCommit == 0 || n == len(steps)-1 {
					if err := db.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			cpu, written := runstats.SelfCPU()-cpu0, churnWritten()-w0
			end := persist.FileHighWater(db)
			b.ReportMetric(float64(written)/float64(b.N), "written-B/change")
			b.ReportMetric(float64(written)/float64(b.N)/(float64(records)/float64(objects)), "written/record")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/change")
			b.ReportMetric(float64(end)/float64(records), "file/records")
		})
	}
}

// churnStep is one change of a churn: an update or creation of object i,
// or its deletion.
type churnStep struct {
	i      int
	delete bool
}

// churnSteps returns n changes to objects 0..objects-1 and those they
// create: 80% updates, 10% creations of the next object, 10% deletions,
// as informerbench's churn makes them. Updates pick an object uniformly,
// or by a Zipf law of exponent 1.1 over the objects in a random order
// (zipf), where a created object takes a random rank. Deletions pick
// uniformly.
func churnSteps(rng *rand.Rand, n, objects int, zipf bool) []churnStep {
	live := rng.Perm(objects) // in rank order
	next := objects
	var z *rand.Zipf
	if zipf {
		z = rand.NewZipf(rng, 1.1, 1, uint64(objects-1))
	}
	out := make([]churnStep, n)
	for k := range out {
		switch r := rng.Intn(10); {
		case r == 8: // create
			p := rng.Intn(len(live) + 1)
			live = append(live, next)
			live[p], live[len(live)-1] = live[len(live)-1], live[p]
			out[k] = churnStep{i: next}
			next++
		case r == 9 && len(live) > 1: // delete
			p := rng.Intn(len(live))
			out[k] = churnStep{i: live[p], delete: true}
			live[p] = live[len(live)-1]
			live = live[:len(live)-1]
		default: // update
			p := rng.Intn(len(live))
			if z != nil {
				if r := int(z.Uint64()); r < len(live) {
					p = r
				}
			}
			out[k] = churnStep{i: live[p]}
		}
	}
	return out
}

// churnKey returns object i's key.
func churnKey(i int) string {
	return fmt.Sprintf("ns-%02d/checkout-api-7d9c8b6f5-%06d", i%20, i)
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
