package cache

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// storedFile is a cache file that internal tests start informers on, over
// one fake source of Pods. A cold start stores the source's Pods; each test
// then starts again on what was stored.
type storedFile struct {
	t    *testing.T
	path string
	src  *fcache.FakeControllerSource
}

func newStoredFile(t *testing.T, src *fcache.FakeControllerSource) *storedFile {
	return &storedFile{t: t, path: filepath.Join(t.TempDir(), "cache.db"), src: src}
}

func (f *storedFile) open() *persist.DB {
	db, err := persist.Open(f.path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return db
}

// informer makes an informer of the source's Pods on db. It lists without
// watch-list semantics, and retries within milliseconds.
func (f *storedFile) informer(db *persist.DB, indexers cache.Indexers) *Informer {
	inf, err := NewSharedIndexInformerWithOptions(setAsideNoWatchList{f.src}, &corev1.Pod{}, InformerOptions{
		Persistence:    Persistence{DB: db, Collection: "pods"},
		Indexers:       indexers,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     10 * time.Millisecond,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return inf
}

// coldStart runs an informer until it has stored n Pods, stops it and
// closes the file.
func (f *storedFile) coldStart(indexers cache.Indexers, n int) {
	db := f.open()
	inf := f.informer(db, indexers)
	cancel, done := runInformer(inf)
	poll.Until(f.t, 30*time.Second, "the cold start's list stored", func() bool {
		return inf.HasSynced() && len(inf.GetStore().ListKeys()) == n
	})
	cancel()
	<-done
	if err := db.Close(); err != nil {
		f.t.Fatal(err)
	}
}

// damage overwrites the stored records of keys with bytes that do not
// decode. The file must be closed.
func (f *storedFile) damage(keys ...string) {
	db, err := bolt.Open(f.path, 0o600, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		objects := tx.Bucket([]byte("collections")).Bucket([]byte("pods")).Bucket([]byte("objects"))
		for _, key := range keys {
			if err := objects.Put([]byte(key), []byte("not a record")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		f.t.Fatal(err)
	}
}

// runInformer runs inf until cancel is called; done is closed once
// RunWithContext has returned.
func runInformer(inf *Informer) (cancel func(), done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	d := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(d) }()
	return cancel, d
}
