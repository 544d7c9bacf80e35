package main

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// copyFixture returns a private copy of the fixture file, for tests that
// damage it.
func copyFixture(t *testing.T) string {
	t.Helper()
	src, err := os.Open(fixtureFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "copy.db")
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// damage edits a collection's buckets with raw bbolt, bypassing persist,
// the way a bug or a bad disk would. Bucket names are the file layout's
// (internal/format), spelled out so that a change to it fails these tests.
func damage(t *testing.T, path, collection string, fn func(coll *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return fn(tx.Bucket([]byte("collections")).Bucket([]byte(collection)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// indexEntry is a byValue key: uvarint(len(value)) + value + object key.
func indexEntry(value, key string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(value)))
	return append(append(b, value...), key...)
}

func index(coll *bolt.Bucket, name, sub string) *bolt.Bucket {
	return coll.Bucket([]byte("indexes")).Bucket([]byte(name)).Bucket([]byte(sub))
}

func TestVerifyDetectsCorruptRecord(t *testing.T) {
	path := copyFixture(t)
	damage(t, path, "pods", func(coll *bolt.Bucket) error {
		return coll.Bucket([]byte("objects")).Put([]byte("storefront/checkout-api-7d9c8b6f5-00001"), []byte("\x93\xde\xad\xbe\xef not a record"))
	})
	r := runInspect(t, "verify", path)
	if r.code != 1 {
		t.Errorf("verify exit code %d, want 1", r.code)
	}
	want := `PROBLEM collection "pods" key "storefront/checkout-api-7d9c8b6f5-00001": record does not decode`
	if !strings.Contains(r.stdout, want) {
		t.Errorf("verify output lacks %q:\n%s", want, r.stdout)
	}
	checkGolden(t, "verify-corrupt-record", strings.ReplaceAll(r.golden(), path, "$COPY"))

	// The other commands still read the rest, and say what they skipped.
	r = runInspect(t, "get", "pods", "-f", path)
	if r.code != 0 || !strings.Contains(r.stderr, `skipped 1 record(s) of collection "pods"`) || strings.Count(r.stdout, "\n") != 4 {
		t.Errorf("get on a file with a corrupt record: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestVerifyDetectsMismatchedIndex(t *testing.T) {
	path := copyFixture(t)
	const (
		pod0 = "storefront/checkout-api-7d9c8b6f5-00000"
		pod1 = "storefront/checkout-api-7d9c8b6f5-00001"
		node = "ip-10-0-1-11.eu-west-1.compute.internal"
	)
	damage(t, path, "pods", func(coll *bolt.Bucket) error {
		// A value→key entry for an object that does not exist.
		if err := index(coll, "namespace", "byValue").Put(indexEntry("ghost", "ghost/pod-x"), nil); err != nil {
			return err
		}
		// A key→values entry whose value→key entry is gone.
		if err := index(coll, "node", "byValue").Delete(indexEntry(node, pod1)); err != nil {
			return err
		}
		// Key→values that disagree with value→key.
		raw, err := msgpack.Marshal([]string{"elsewhere"})
		if err != nil {
			return err
		}
		return index(coll, "namespace", "byKey").Put([]byte(pod0), raw)
	})
	r := runInspect(t, "verify", path)
	if r.code != 1 {
		t.Errorf("verify exit code %d, want 1", r.code)
	}
	for _, want := range []string{
		`PROBLEM collection "pods" index "namespace": value "ghost" → key "ghost/pod-x", but no object is stored under "ghost/pod-x"`,
		`PROBLEM collection "pods" index "namespace": value "ghost" → key "ghost/pod-x", but "ghost/pod-x" has no key→values entry`,
		`PROBLEM collection "pods" index "namespace": value "storefront" → key "` + pod0 + `", but the key→values entry of "` + pod0 + `" is ["elsewhere"]`,
		`PROBLEM collection "pods" index "namespace": key "` + pod0 + `" lists value "elsewhere", but there is no value "elsewhere" → key "` + pod0 + `" entry`,
		`PROBLEM collection "pods" index "node": key "` + pod1 + `" lists value "` + node + `", but there is no value "` + node + `" → key "` + pod1 + `" entry`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify output lacks\n  %s\ngot:\n%s", want, r.stdout)
		}
	}
	checkGolden(t, "verify-mismatched-index", strings.ReplaceAll(r.golden(), path, "$COPY"))
}

func TestVerifyDetectsIndexBucketMismatch(t *testing.T) {
	path := copyFixture(t)
	damage(t, path, "deployments", func(coll *bolt.Bucket) error {
		return coll.Bucket([]byte("indexes")).DeleteBucket([]byte("namespace"))
	})
	damage(t, path, "nodes", func(coll *bolt.Bucket) error {
		ib, err := coll.Bucket([]byte("indexes")).CreateBucket([]byte("zone"))
		if err != nil {
			return err
		}
		if _, err := ib.CreateBucket([]byte("byValue")); err != nil {
			return err
		}
		_, err = ib.CreateBucket([]byte("byKey"))
		return err
	})
	r := runInspect(t, "verify", path)
	for _, want := range []string{
		`PROBLEM collection "deployments" index "namespace": listed (version "|k8s.io/client-go/tools/cache.MetaNamespaceIndexFunc") but its bucket is missing`,
		`PROBLEM collection "nodes" index "zone": bucket present but the collection does not list the index`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify output lacks\n  %s\ngot:\n%s", want, r.stdout)
		}
	}
	if r.code != 1 {
		t.Errorf("verify exit code %d, want 1", r.code)
	}
}

// TestGetNamespaceReadsTheNamespaceIndex checks that get -n reads the
// namespace's keys from the collection's namespace index (as the informer's
// listers answer a namespace) instead of walking every record: an object
// the index does not list for the namespace is not printed, and one it
// lists but the file does not hold is reported.
func TestGetNamespaceReadsTheNamespaceIndex(t *testing.T) {
	path := copyFixture(t)
	const (
		pod1  = "storefront/checkout-api-7d9c8b6f5-00001"
		ghost = "storefront/ghost"
	)
	damage(t, path, "pods", func(coll *bolt.Bucket) error {
		byValue := index(coll, "namespace", "byValue")
		if err := byValue.Delete(indexEntry("storefront", pod1)); err != nil {
			return err
		}
		return byValue.Put(indexEntry("storefront", ghost), nil)
	})
	r := runInspect(t, "get", "pods", "-f", path, "-n", "storefront", "-o", "name")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if want := "pod/checkout-api-7d9c8b6f5-00000\npod/checkout-api-7d9c8b6f5-00003\n"; r.stdout != want {
		t.Errorf("stdout:\n%s\nwant (the objects the index lists):\n%s", r.stdout, want)
	}
	if !strings.Contains(r.stderr, `key "storefront/ghost": indexed under namespace "storefront" but not stored`) {
		t.Errorf("stderr does not report the indexed key that is not stored:\n%s", r.stderr)
	}
}
