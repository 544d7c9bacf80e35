package bench

import (
	"bufio"
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
	"k8s.io/client-go/kubernetes/scheme"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
	"github.com/boltinformer/boltinformer/persist"
)

// BenchmarkRandomUpdates measures what scattered updates cost the file at
// each page size: BENCH_OBJECTS Pods (default 10,000) are loaded as a list
// is (one Replace in key order, so appending commits fill the pages), then
// each op updates a random Pod (new resourceVersion and annotation), with a
// group commit (fsync on) every 300 updates, about what a 20 ms batch
// holds at 15,000 updates/s (BENCH_UPDATES_PER_COMMIT sets another: 2 is
// what it holds at 100 updates/s). Reported per update:
//
//   - cpu-ns/update: process CPU time (encoding, the store, the commits);
//   - commit-ns/update: time spent waiting for the commits;
//   - written-B/update: bytes the process wrote (Linux: /proc/self/io), which
//     is what larger pages cost, since a commit rewrites every page it
//     touches;
//   - file/objects: the file over the Pods' protobuf bytes afterwards.
//
// BENCH_JOURNAL_SHARE sets persist.Options.JournalShare (negative: no
// journal, every commit writes the trees). The journal's saving shows only
// over enough updates to fill and fold it several times: at 10,000 Pods
// and the default share, tens of thousands (-benchtime=50000x).
func BenchmarkRandomUpdates(b *testing.B) {
	perCommit := envCount("BENCH_UPDATES_PER_COMMIT", 300)
	journalShare, _ := strconv.ParseFloat(os.Getenv("BENCH_JOURNAL_SHARE"), 64)
	objs := pods(objects)
	list := make([]interface{}, len(objs))
	var objBytes int64
	for i, o := range objs {
		list[i] = o
		objBytes += int64(o.Size())
	}
	for _, pageSize := range []int{4 << 10, 16 << 10, 32 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("page=%dKiB", pageSize>>10), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "cache.db")
			db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, PageSize: pageSize, BatchInterval: time.Hour, BatchLimit: 1 << 30, JournalShare: journalShare})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			idx, err := bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: "pods", Indexers: indexers})
			if err != nil {
				b.Fatal(err)
			}
			if err := idx.Replace(list, "1"); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := db.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			updated := make([]*corev1.Pod, b.N)
			for n := range updated {
				p := objs[rng.Intn(len(objs))].DeepCopy()
				p.ResourceVersion = strconv.Itoa(1000 + n)
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations["bench/tick"] = strconv.Itoa(n)
				updated[n] = p
			}
			var committing time.Duration
			w0, cpu0 := writtenBytes(), runstats.SelfCPU()
			b.ResetTimer()
			for n, p := range updated {
				if err := idx.Update(p); err != nil {
					b.Fatal(err)
				}
				if (n+1)%perCommit == 0 || n == len(updated)-1 {
					t := time.Now()
					if err := db.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					committing += time.Since(t)
				}
			}
			b.StopTimer()
			cpu, written := runstats.SelfCPU()-cpu0, writtenBytes()-w0
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/update")
			b.ReportMetric(float64(committing.Nanoseconds())/float64(b.N), "commit-ns/update")
			b.ReportMetric(float64(written)/float64(b.N), "written-B/update")
			b.ReportMetric(float64(fileBytes(b, path))/float64(objBytes), "file/objects")
		})
	}
}

// writtenBytes is what the process has written so far (wchar of
// /proc/self/io), or 0 where that is not available.
func writtenBytes() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
