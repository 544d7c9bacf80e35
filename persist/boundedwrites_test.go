package persist_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// timedChurn loads objects into a new file as a cold start does, then
// applies changes at 100 a second, as churnSteps makes them, with the
// default one-second batch interval. All of it runs in a synctest bubble,
// so the batch timer runs on the bubble's clock. It returns the page bytes
// written per change over the mean record, and the commits that wrote
// changes during the churn.
//
// With paged, the objects come as a paged cold list stores them (cache's
// pagedList): pages of 500 in key order, 50 ms apart, each flushed on a
// goroutine once a thousand objects were applied since the last flush.
// Otherwise they come in one Apply.
func timedChurn(t *testing.T, objects, changes, cacheObjects int, paged bool) (float64, int64) {
	path := filepath.Join(t.TempDir(), "cache.db")
	var written float64
	var commits atomic.Int64
	synctest.Test(t, func(t *testing.T) {
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		c, err := db.Collection("cms", persist.CollectionOptions{
			Indexes:      map[string]string{"namespace": "v1", "app": "v1"},
			IndexValues:  churnIndexValues,
			CacheObjects: cacheObjects,
		})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(1))
		pad := make([]byte, 6000)
		for i := range pad {
			pad[i] = 'a' + byte(rng.Intn(26))
		}
		ops := make([]persist.Op, objects)
		for i := range ops {
			ops[i] = churnOp(i, 1, string(pad))
		}
		ctx := context.Background()
		if !paged {
			if err := c.Apply(ops, "1"); err != nil {
				t.Fatal(err)
			}
		} else {
			sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
			var flushing chan struct{}
			wait := func() {
				if flushing != nil {
					<-flushing
				}
			}
			since := 0
			for i := 0; i < len(ops); i += 500 {
				page := ops[i:min(i+500, len(ops))]
				if err := c.ApplyPart(page); err != nil {
					t.Fatal(err)
				}
				if since += len(page); since >= 1000 {
					since = 0
					wait()
					done := make(chan struct{})
					flushing = done
					go func() {
						defer close(done)
						_ = db.Flush(ctx)
					}()
				}
				time.Sleep(50 * time.Millisecond)
			}
			wait()
			if err := c.ApplyList(nil, "1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		records, err := recordBytes(c)
		if err != nil {
			t.Fatal(err)
		}
		db.AddCommitObserver(func(s persist.CommitStats) {
			if s.Err == nil && s.Changes > 0 {
				commits.Add(1)
			}
		})
		w0 := persist.PagesWritten(db)
		for n, st := range churnSteps(rng, changes, objects, false) {
			op := persist.Op{Key: churnKey(st.i), Delete: true}
			if !st.delete {
				op = churnOp(st.i, 2+n, string(pad))
			}
			if err := c.Apply([]persist.Op{op}, strconv.Itoa(2+n)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		written = float64(persist.PagesWritten(db)-w0) / float64(changes) / (float64(records) / float64(objects))
	})
	return written, commits.Load()
}

// A churn after a cold list received in pages writes what it writes after
// a list applied whole, bounded cache or not. Each page's flush commits at
// once. The batch timer pending then must not leave a second timer behind
// it (see noteApplied). Otherwise the churn is committed once per interval
// per timer left, and each commit pays the meta page, the freelist and the
// journal's branch and tail again.
func TestChurnAfterPagedListWritesAsAfterOneList(t *testing.T) {
	const objects, changes = 3000, 20000
	whole, wholeCommits := timedChurn(t, objects, changes, 0, false)
	for _, cacheObjects := range []int{0, objects / 100} {
		t.Run(fmt.Sprintf("CacheObjects=%d", cacheObjects), func(t *testing.T) {
			got, commits := timedChurn(t, objects, changes, cacheObjects, true)
			t.Logf("written per change over the record: %.2f after a paged list (%d commits), %.2f after one Apply (%d commits)", got, commits, whole, wholeCommits)
			if got > 1.1*whole {
				t.Errorf("a churn after a paged list wrote %.2f records per change in %d commits, want at most 1.1 times %.2f, what it writes after one Apply in %d commits", got, commits, whole, wholeCommits)
			}
		})
	}
}
