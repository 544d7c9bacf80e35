package persist_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// appliedChange is a change applied in a synctest bubble, and when.
type appliedChange struct {
	at time.Time
	rv int
}

// dueResourceVersion returns the newest resourceVersion of log applied an
// interval ago or more, which must be on disk by now; 0 if none.
func dueResourceVersion(log []appliedChange, interval time.Duration) int {
	due := 0
	for _, a := range log {
		if time.Since(a.at) >= interval {
			due = a.rv
		}
	}
	return due
}

// timedDB opens a file with the given batch interval inside a synctest
// bubble, where the batch timer runs on the bubble's clock. It counts the
// commits that wrote changes, and closes the file when the bubble's test
// ends.
func timedDB(t *testing.T, path string, interval time.Duration) (*persist.DB, *persist.Collection, *atomic.Int64) {
	t.Helper()
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: interval, BatchLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commits := &atomic.Int64{}
	db.AddCommitObserver(func(s persist.CommitStats) {
		if s.Err == nil && s.Changes > 0 {
			commits.Add(1)
		}
	})
	return db, c, commits
}

// A Flush commits at once, while the batch timer an earlier change armed
// is still pending. The changes after that commit must wait for one timer,
// not arm another. A cold list received in pages flushes every thousand
// objects. If each flush left a timer of its own behind, a steady stream
// of watch events afterwards would be committed once per interval per
// timer. Every commit rewrites the meta page, the freelist and the
// journal's branch and tail, whatever it holds.
func TestFlushesLeaveOneBatchTimer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	synctest.Test(t, func(t *testing.T) {
		db, c, commits := timedDB(t, path, time.Second)
		ctx := context.Background()
		rv := 0
		apply := func() {
			rv++
			o := cm(fmt.Sprintf("cm-%03d", rv%500), strconv.Itoa(rv))
			put(t, c, strconv.Itoa(rv), o)
		}
		// A paged list: a page, and a flush of it, ten times a second.
		for range 30 {
			apply()
			if err := db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Then watch events, 100 a second for a minute.
		synctest.Wait()
		before := commits.Load()
		for range 6000 {
			apply()
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if got := commits.Load() - before; got > 61 {
			t.Errorf("a minute of changes after 30 flushes took %d commits, want at most 61 (one per BatchInterval)", got)
		}
	})
}

// TestBatchTimerGenerator runs seeded random schedules of applies,
// flushes and idle gaps. Two properties of the group commit must hold in
// each. A change applied at time t is on disk by t + BatchInterval. And
// the batch timer commits at most once per interval, so that commits
// number at most the flushes plus the elapsed intervals plus one.
func TestBatchTimerGenerator(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				interval := time.Duration(50+rng.Intn(950)) * time.Millisecond
				db, c, commits := timedDB(t, path, interval)
				ctx := context.Background()
				start := time.Now()
				var log []appliedChange
				rv, flushes := 0, 0
				// checkDue fails if a change applied an interval ago or
				// more is not on disk yet.
				checkDue := func() {
					synctest.Wait()
					due := dueResourceVersion(log, interval)
					got, err := c.CommittedResourceVersion()
					if err != nil {
						t.Fatal(err)
					}
					if n, _ := strconv.Atoi(got); n < due {
						t.Fatalf("at %v (interval %v): the file holds resourceVersion %q, want at least %d, applied %v ago or more", time.Since(start), interval, got, due, interval)
					}
				}
				apply := func() {
					rv++
					put(t, c, strconv.Itoa(rv), cm(fmt.Sprintf("cm-%03d", rng.Intn(200)), strconv.Itoa(rv)))
					log = append(log, appliedChange{time.Now(), rv})
				}
				pause := func() { time.Sleep(time.Duration(rng.Int63n(int64(interval / 4)))) }
				for range 60 {
					switch r := rng.Intn(100); {
					case r < 20: // a list in pages, each flushed
						for range 2 + rng.Intn(14) {
							apply()
							flushes++
							if err := db.Flush(ctx); err != nil {
								t.Fatal(err)
							}
							pause()
							checkDue()
						}
					case r < 85: // a stream of changes
						for range 10 + rng.Intn(190) {
							apply()
							pause()
							checkDue()
						}
					default: // quiet
						time.Sleep(interval + time.Duration(rng.Int63n(int64(2*interval))))
						checkDue()
					}
				}
				time.Sleep(interval)
				checkDue()
				elapsed := time.Since(start)
				if max := int64(flushes) + int64(elapsed/interval) + 1; commits.Load() > max {
					t.Errorf("%d commits in %v at interval %v with %d flushes, want at most %d", commits.Load(), elapsed, interval, flushes, max)
				}
			})
		})
	}
}
