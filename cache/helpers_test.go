package cache_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// testFile is a cache file that tests open, close and reopen.
type testFile struct {
	t    testing.TB
	path string
	db   *persist.DB
}

func newTestFile(t testing.TB) *testFile {
	t.Helper()
	f := &testFile{t: t, path: filepath.Join(t.TempDir(), "cache.db")}
	f.open()
	t.Cleanup(func() {
		if f.db != nil {
			if err := f.db.Close(); err != nil {
				t.Errorf("closing %s: %v", f.path, err)
			}
		}
	})
	return f
}

func (f *testFile) open() {
	f.t.Helper()
	db, err := persist.Open(f.path, persist.Options{
		Scheme:        scheme.Scheme,
		NoSync:        true,
		BatchInterval: time.Hour, // commits happen only on Flush or Close: reads in between come from the layers
	})
	if err != nil {
		f.t.Fatalf("open %s: %v", f.path, err)
	}
	f.db = db
}

func (f *testFile) reopen() {
	f.t.Helper()
	if err := f.db.Close(); err != nil {
		f.t.Fatalf("close: %v", err)
	}
	f.db = nil
	f.open()
}

func (f *testFile) flush() {
	f.t.Helper()
	if err := f.db.Flush(context.Background()); err != nil {
		f.t.Fatalf("flush: %v", err)
	}
}

func (f *testFile) indexer(opts bcache.IndexerOptions) *bcache.Indexer {
	f.t.Helper()
	opts.DB = f.db
	if opts.Collection == "" {
		opts.Collection = "test"
	}
	i, err := bcache.NewIndexer(opts)
	if err != nil {
		f.t.Fatalf("NewIndexer: %v", err)
	}
	return i
}

// stage names the three places a read can be served from.
type stage string

const (
	inMemory  stage = "applied"   // in the pending layer, not yet committed
	committed stage = "committed" // flushed to the file, same process
	reopened  stage = "reopened"  // read back by a new DB on the same file
)

// atEachStage runs check against the indexer at three stages. The first is
// as it is now, with a batch interval long enough that nothing has
// committed. The second is after a flush, and the third after closing and
// reopening the file. So every expectation holds wherever the data is
// served from.
func atEachStage(t *testing.T, f *testFile, opts bcache.IndexerOptions, i **bcache.Indexer, check func(t *testing.T, s stage)) {
	t.Helper()
	check(t, inMemory)
	f.flush()
	check(t, committed)
	f.reopen()
	*i = f.indexer(opts)
	check(t, reopened)
}

func pod(ns, name, rv string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, Labels: labels}}
}

func configMap(ns, name, rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}, Data: data}
}

func widget(ns, name, rv, color string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"spec":       map[string]interface{}{"color": color, "size": int64(3)},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

func names(objs []interface{}) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		key, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			panic(err)
		}
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func eq(a, b []string) bool {
	return strings.Join(sorted(a), "\x00") == strings.Join(sorted(b), "\x00") && len(a) == len(b)
}

func byLabel(label string) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return nil, fmt.Errorf("%T has no metadata", obj)
		}
		if v, ok := m.GetLabels()[label]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}
}
