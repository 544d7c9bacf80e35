package inspectfile_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// writeFile writes two ConfigMaps, indexed by namespace, and closes the file.
func writeFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Collection("configmaps", persist.CollectionOptions{
		Indexes: map[string]string{"namespace": "v1"},
		IndexValues: func(_ string, obj runtime.Object) ([]string, error) {
			return []string{obj.(*corev1.ConfigMap).Namespace}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persist.Op
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"}}
		ops = append(ops, persist.Op{Key: "ns/" + name, Object: cm, Indexes: map[string][]string{"namespace": {"ns"}}})
	}
	if err := c.Apply(ops, "7"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadsWhatPersistWrote(t *testing.T) {
	path := writeFile(t)
	f, err := inspectfile.Open(path, inspectfile.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var problems []error
	if err := f.Check(func(err error) { problems = append(problems, err) }); err != nil || len(problems) > 0 {
		t.Errorf("Check = %v, problems %v", err, problems)
	}
	st, err := f.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Schema != 5 || st.DataSize <= 0 || st.Pages*st.PageSize != int(st.DataSize) || st.Created.IsZero() {
		t.Errorf("Stats = %+v", st)
	}

	codec := persist.NewCodec(scheme.Scheme)
	var keys []string
	var entries []string
	err = f.View("configmaps", func(c *inspectfile.Collection) error {
		if err := c.ForEachRecord(func(key string, rec []byte) error {
			obj, err := codec.Decode(rec)
			if err != nil {
				return err
			}
			if cm := obj.(*corev1.ConfigMap); "ns/"+cm.Name != key {
				t.Errorf("record %q holds %s", key, cm.Name)
			}
			keys = append(keys, key)
			return nil
		}); err != nil {
			return err
		}
		return c.ForEachIndexEntry("namespace", func(value, key string, _ []byte, err error) error {
			entries = append(entries, value+"→"+key)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ns/a", "ns/b"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("records %v, want %v", keys, want)
	}
	if want := []string{"ns→ns/a", "ns→ns/b"}; !reflect.DeepEqual(entries, want) {
		t.Errorf("index entries %v, want %v", entries, want)
	}
	if err := f.View("nope", func(*inspectfile.Collection) error { return nil }); !errors.Is(err, persist.ErrNoCollection) {
		t.Errorf("View of a missing collection = %v, want ErrNoCollection", err)
	}
}

// TestOpenRefusesAFileHeldForWriting checks that a live file is not read
// behind its writer's back: the lock keeps inspect out, with ErrLocked.
func TestOpenRefusesAFileHeldForWriting(t *testing.T) {
	path := writeFile(t)
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = inspectfile.Open(path, inspectfile.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, persist.ErrLocked) {
		t.Fatalf("Open of a file held for writing = %v, want ErrLocked", err)
	}
	// A snapshot of the live file opens.
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := db.SnapshotFile(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	f, err := inspectfile.Open(snap, inspectfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
