package main

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// verify reports a collection whose structure is damaged, naming the
// collection and what is missing, and exits 1. persist's DB.Collection
// empties such a collection when an informer opens it for writing.
func TestVerifyReportsDamagedCollection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(coll *bolt.Bucket) error
		want   string
	}{
		{"meta missing", func(coll *bolt.Bucket) error { return coll.DeleteBucket([]byte("meta")) }, `collection "pods": corrupt record: missing meta or objects bucket`},
		{"objects missing", func(coll *bolt.Bucket) error { return coll.DeleteBucket([]byte("objects")) }, `collection "pods": corrupt record: missing meta or objects bucket`},
		{"indexes missing", func(coll *bolt.Bucket) error { return coll.DeleteBucket([]byte("indexes")) }, `collection "pods" has no "indexes" bucket`},
		{"an index missing", func(coll *bolt.Bucket) error {
			return coll.Bucket([]byte("indexes")).DeleteBucket([]byte("node"))
		}, `PROBLEM collection "pods" index "node": listed (version `},
		{"an index's byValue missing", func(coll *bolt.Bucket) error {
			return coll.Bucket([]byte("indexes")).Bucket([]byte("node")).DeleteBucket([]byte("byValue"))
		}, `collection "pods" index "node" lacks its "byValue" or "byKey" bucket`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyFixture(t)
			damage(t, path, "pods", tc.damage)
			r := runInspect(t, "verify", path)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("verify: exit code %d, want 1 and %q\n%s%s", r.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
}
