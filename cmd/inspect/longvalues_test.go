package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// An index value too long for a bbolt key is stored hashed, with the value
// beside it. verify and index read it as they read any other value. verify
// reports an entry whose value does not have its hash.
func TestLongIndexValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.db")
	long := strings.Repeat("l", 40<<10)
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Collection("configmaps", persist.CollectionOptions{
		Description: map[string]string{"resource": "configmaps", "version": "v1", "kind": "ConfigMap"},
		Indexes:     map[string]string{"note": "1"},
		IndexValues: func(string, runtime.Object) ([]string, error) { return nil, nil }, // no objects yet
	})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persist.Op
	for _, name := range []string{"a", "b"} {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}}
		ops = append(ops, persist.Op{Key: "ns/" + name, Object: o, Indexes: map[string][]string{"note": {long, "short"}}})
	}
	if err := c.Apply(ops, "1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	r := runInspect(t, "verify", path)
	if r.code != 0 || strings.Contains(r.stdout, "PROBLEM") {
		t.Errorf("verify of a file with a 40 KiB index value: exit code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runInspect(t, "index", "configmaps", "note", "-f", path)
	if r.code != 0 || !strings.Contains(r.stdout, long+"   2\n") || !strings.Contains(r.stdout, "short") {
		t.Errorf("index lists the values: exit code %d\n%.300s%s", r.code, r.stdout, r.stderr)
	}
	r = runInspect(t, "index", "configmaps", "note", long, "-o", "key", "-f", path)
	if r.code != 0 || r.stdout != "ns/a\nns/b\n" {
		t.Errorf("index of the long value: exit code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	damage(t, path, "configmaps", func(coll *bolt.Bucket) error {
		byValue := index(coll, "note", "byValue")
		var hashed []byte
		if err := byValue.ForEach(func(k, v []byte) error {
			if len(v) > 0 && hashed == nil {
				hashed = bytes.Clone(k)
			}
			return nil
		}); err != nil {
			return err
		}
		return byValue.Put(hashed, []byte(strings.Repeat("x", len(long))))
	})
	r = runInspect(t, "verify", path)
	want := `PROBLEM collection "configmaps" index "note": value→key entry`
	if r.code != 1 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "without the entry's hash") {
		t.Errorf("verify of a hashed entry holding another value: exit code %d, want 1 and %q\n%.2000s", r.code, want, r.stdout)
	}
}
