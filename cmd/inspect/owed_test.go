package main

import (
	"regexp"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// TestCommandsDeriveOwedIndexEntries checks that verify, index and stats
// read a collection being filled, whose index entries by value are owed,
// as the same collection with them written. The owed file has its node
// index's byValue emptied, as a list's commits leave it before the
// resourceVersion is stored.
func TestCommandsDeriveOwedIndexEntries(t *testing.T) {
	whole := copyFixture(t)
	owed := copyFixture(t)
	damage(t, owed, "pods", func(coll *bolt.Bucket) error {
		meta := coll.Bucket(format.CollMetaBucket)
		if err := meta.Delete(format.RVKey); err != nil {
			return err
		}
		if err := meta.Put(format.ByValueOwedKey, []byte("1")); err != nil {
			return err
		}
		ib := coll.Bucket(format.IndexesBucket).Bucket([]byte("node"))
		if err := ib.DeleteBucket(format.ByValueBucket); err != nil {
			return err
		}
		_, err := ib.CreateBucket(format.ByValueBucket)
		return err
	})
	for _, args := range [][]string{{"verify"}, {"index", "pods", "node", "-f"}, {"index", "pods", "namespace", "-f"}} {
		want := runInspect(t, append(args, whole)...)
		got := runInspect(t, append(args, owed)...)
		if want.code != 0 || got.code != want.code || strings.ReplaceAll(got.stdout, owed, whole) != want.stdout {
			t.Errorf("inspect %v of the owed file: exit %d\n%s%s\nwant exit %d\n%s", args, got.code, got.stdout, got.stderr, want.code, want.stdout)
		}
	}
	entries := regexp.MustCompile(`(?m)^pods +\d+ +\S+ +(\d+) `)
	want, got := runInspect(t, "stats", whole), runInspect(t, "stats", owed)
	if w, g := entries.FindStringSubmatch(want.stdout), entries.FindStringSubmatch(got.stdout); w == nil || g == nil || w[1] != g[1] {
		t.Errorf("stats of the owed file:\n%s\nwant the index entries of\n%s", got.stdout, want.stdout)
	}
}
