package controllerruntime

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// cacheFile is a cache's file. A file named by Options.Path is opened when
// first needed, by Start or by the first informer the cache builds.
// IndexField, GetInformer, Get and List build an informer before Start.
// The file is closed when Start returns. A cache built and never used holds
// neither the file's lock nor its commit goroutine, as controller-runtime's
// cache holds nothing before Start. A DB given in Options.DB is used as it is.
type cacheFile struct {
	path    string
	opts    persist.Options
	metrics *bcache.Metrics

	// db is the open file, set once and read without mu.
	db atomic.Pointer[persist.DB]

	// mu serializes opening and closing, and guards the fields below.
	mu   sync.Mutex
	owns bool  // db was opened here, from path, and is to be closed here
	err  error // why opening failed; every later use fails with it
}

// get returns the open file, opening it on the first call.
func (f *cacheFile) get() (*persist.DB, error) {
	if db := f.db.Load(); db != nil {
		return db, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if db := f.db.Load(); db != nil {
		return db, nil
	}
	if f.err != nil {
		return nil, f.err
	}
	db, err := persist.Open(f.path, f.opts)
	switch {
	case errors.Is(err, persist.ErrOpenInProcess):
		f.err = fmt.Errorf("boltinformer: the cache file %s is in use by another cache (or DB) of this process; stop that cache first. A cache holds its file from its Start, or from its first informer (IndexField, GetInformer, Get or List before Start), until its Start returns: %w", f.path, err)
	case errors.Is(err, persist.ErrLocked):
		f.err = fmt.Errorf("boltinformer: the cache file %s is in use by another process — another replica sharing the file, or a previous instance still stopping; give each replica its own file: %w", f.path, err)
	case err != nil:
		f.err = fmt.Errorf("boltinformer: opening the cache file: %w", err)
	default:
		f.owns = true
		if f.metrics != nil {
			f.metrics.ObserveDB(db)
		}
		f.db.Store(db)
		return db, nil
	}
	return nil, f.err
}

// close closes the file if it was opened here. Start, its only caller,
// called get first, so the file is not opened again after close. A later
// use gets the closed DB, or the error opening gave. An informer built then
// fails to open its collection and is kept in memory.
func (f *cacheFile) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owns {
		return nil
	}
	f.owns = false
	if err := f.db.Load().Close(); err != nil {
		return fmt.Errorf("boltinformer: closing the cache file: %w", err)
	}
	return nil
}
