package inspectfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// Options configures Open.
type Options struct {
	// LockTimeout bounds the wait for a file another process holds for
	// writing. Zero means persist.DefaultLockTimeout.
	LockTimeout time.Duration
	// Scheme decodes typed records for DB's reads; nil allows only
	// unstructured ones.
	Scheme *runtime.Scheme
}

// File is a cache file open read-only.
type File struct {
	path string
	db   *persist.DB
	bolt *bolt.DB
}

// Open opens the cache file at path read-only.
func Open(path string, opts Options) (*File, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = persist.DefaultLockTimeout
	}
	db, err := persist.Open(path, persist.Options{ReadOnly: true, LockTimeout: opts.LockTimeout, Scheme: opts.Scheme})
	if err != nil {
		return nil, err
	}
	// A second read-only handle shares the file's lock with db's. It loads
	// the freelist (a read-only persist.DB does not), which Stats reports.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		ReadOnly: true, Timeout: opts.LockTimeout, PreLoadFreelist: true, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		_ = db.Close()
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s: gave up after %s", persist.ErrLocked, path, opts.LockTimeout)
		}
		return nil, fmt.Errorf("opening cache file %s: %w", path, err)
	}
	return &File{path: path, db: db, bolt: bdb}, nil
}

// Close closes the file.
func (f *File) Close() error {
	return errors.Join(f.bolt.Close(), f.db.Close())
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// DB returns the file as a read-only *persist.DB, for decoded reads. It is
// closed by Close.
func (f *File) DB() *persist.DB { return f.db }

// Check runs bbolt's page-level consistency check (tx.Check) and calls fn
// for every problem it finds.
func (f *File) Check(fn func(error)) error {
	return f.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			fn(err)
		}
		return nil
	})
}

// Stats describes a cache file as a whole.
type Stats struct {
	// Schema is the file's layout version; Created is when it was made.
	Schema  int
	Created time.Time
	// FileSize is the size on disk; DataSize the bytes below bbolt's
	// high-water mark (the rest is preallocated growth).
	FileSize int64
	DataSize int64
	PageSize int
	// Pages is the number of pages below the high-water mark; FreePages of
	// them are on the freelist (reusable), PendingPages freed by a
	// transaction some reader may still see.
	Pages        int
	FreePages    int
	PendingPages int
	// TxID is the ID of the last committed write transaction.
	TxID int
}

// Stats returns statistics of the whole file.
func (f *File) Stats() (Stats, error) {
	var s Stats
	st, err := os.Stat(f.path)
	if err != nil {
		return s, err
	}
	s.FileSize = st.Size()
	s.PageSize = f.bolt.Info().PageSize
	err = f.bolt.View(func(tx *bolt.Tx) error {
		s.DataSize = tx.Size()
		s.TxID = tx.ID()
		meta := tx.Bucket(format.MetaBucket)
		if meta == nil {
			return fmt.Errorf("%w: %s has no %q bucket", persist.ErrNotCacheFile, f.path, format.MetaBucket)
		}
		s.Schema, _ = strconv.Atoi(string(meta.Get(format.SchemaKey)))
		if raw := meta.Get(format.CreatedKey); raw != nil {
			s.Created, _ = time.Parse(time.RFC3339Nano, string(raw))
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	if s.PageSize > 0 {
		s.Pages = int(s.DataSize / int64(s.PageSize))
	}
	bs := f.bolt.Stats()
	s.FreePages, s.PendingPages = bs.FreePageN, bs.PendingPageN
	return s, nil
}

// Records calls fn with each record of the named collection (its objects
// with its journal applied, as Collection.ForEachRecord), in key order: the
// bytes as the file holds them, valid only during fn.
func (f *File) Records(collection string, fn func(key string, record []byte) error) error {
	return f.bolt.View(func(tx *bolt.Tx) error {
		colls := tx.Bucket(format.CollectionsBucket)
		if colls == nil || colls.Bucket([]byte(collection)) == nil {
			return fmt.Errorf("%w: %q", persist.ErrNoCollection, collection)
		}
		b := colls.Bucket([]byte(collection))
		j, err := readJournal(b, collection)
		if err != nil {
			return err
		}
		return j.forEachRecord(format.CollectionTree(b, format.ObjectsBucket), fn)
	})
}

// ReadRecords returns a copy of every record of the named collection (its
// objects with its journal applied) in the cache file at path, by key.
func ReadRecords(path, collection string) (map[string][]byte, error) {
	f, err := Open(path, Options{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	err = f.Records(collection, func(key string, rec []byte) error {
		out[key] = bytes.Clone(rec)
		return nil
	})
	return out, err
}
