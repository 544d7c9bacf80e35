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
	damage(t, owed, "pods", owe)
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

// owe marks the pods collection's byValue entries owed, as a list's commits
// leave a collection before its resourceVersion is stored, with the node
// index's byValue emptied.
func owe(coll *bolt.Bucket) error {
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
}

// A key→values entry that does not decode is a problem verify reports and
// goes on past, as it does for the same file with its byValue entries
// written. While they are owed, verify derives them from byKey, and that
// derivation must not turn one damaged entry into a failure of the whole
// verify (or of stats and index), the tool's answer for a damaged file.
func TestVerifyReportsDamagedByKeyOfOwedFile(t *testing.T) {
	const pod0 = "storefront/checkout-api-7d9c8b6f5-00000"
	undecodable := func(coll *bolt.Bucket) error {
		// 0xc1 is the one byte msgpack never uses.
		return index(coll, "node", "byKey").Put([]byte(pod0), []byte{0xc1})
	}
	whole, owed := copyFixture(t), copyFixture(t)
	damage(t, whole, "pods", undecodable)
	damage(t, owed, "pods", func(coll *bolt.Bucket) error {
		if err := owe(coll); err != nil {
			return err
		}
		return undecodable(coll)
	})
	want := `PROBLEM collection "pods" index "node": key→values entry of "` + pod0 + `" does not decode`
	w := runInspect(t, "verify", whole)
	if w.code != 1 || !strings.Contains(w.stdout, want) {
		t.Fatalf("verify of the paid file: exit %d, want 1 and %q\n%s%s", w.code, want, w.stdout, w.stderr)
	}
	g := runInspect(t, "verify", owed)
	if g.code != w.code || !strings.Contains(g.stdout, want) {
		t.Errorf("verify of the owed file: exit %d, want %d and %q\nstdout:\n%sstderr:\n%s", g.code, w.code, want, g.stdout, g.stderr)
	}
	for _, args := range [][]string{{"stats"}, {"index", "pods", "node", "-f"}} {
		w := runInspect(t, append(args, whole)...)
		g := runInspect(t, append(args, owed)...)
		if g.code != w.code {
			t.Errorf("inspect %v: exit %d on the owed file, %d on the paid one\nowed stderr:\n%s", args, g.code, w.code, g.stderr)
		}
	}
}
