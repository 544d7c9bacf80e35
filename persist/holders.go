package persist

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// holders are the cache files the DBs of this process hold. Open uses them
// to tell a file held in this process from one held by another. bbolt's
// lock (flock) belongs to an open file, not to a process. Without holders,
// a second Open of a file this process holds would wait Options.LockTimeout.
// It would then report the file locked by another process.
var holders struct {
	mu   sync.Mutex
	held []*holder // guarded by mu
}

// holder is one DB's claim on its file, from open until Close released the
// file's lock.
type holder struct {
	abs      string // absolute path given to Open
	readOnly bool
	released chan struct{} // closed by unclaim

	// Guarded by holders.mu.
	info    os.FileInfo // the file, once it exists
	closing bool        // Close has begun: the lock is about to be released
}

// claim records that a DB of this process is about to open path. Another DB
// may already hold it in a conflicting mode. A writer excludes every other
// DB, and a reader excludes only writers, as the file's lock does. claim
// then fails at once with ErrOpenInProcess (and ErrLocked). If that DB is
// closing, claim waits for the release instead, at most opts.LockTimeout,
// as bbolt would for the lock. It calls opts.claimWaiting, if set, as it
// starts to wait. The file is recognised by its absolute path. Once it
// exists, it is also recognised as the same file, through a link or another
// spelling. Call opened once the file exists, and unclaim after its lock was
// released.
func claim(path string, opts Options) (*holder, error) {
	readOnly := opts.ReadOnly
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("opening cache file %s: %w", path, err)
	}
	var expired <-chan time.Time
	for {
		info, _ := os.Stat(path) // nil if it does not exist yet
		holders.mu.Lock()
		i := slices.IndexFunc(holders.held, func(h *holder) bool {
			same := h.abs == abs || (info != nil && h.info != nil && os.SameFile(h.info, info))
			return same && (!readOnly || !h.readOnly)
		})
		if i < 0 {
			h := &holder{abs: abs, info: info, readOnly: readOnly, released: make(chan struct{})}
			holders.held = append(holders.held, h)
			holders.mu.Unlock()
			return h, nil
		}
		other := holders.held[i]
		closing := other.closing
		holders.mu.Unlock()
		mode := "for writing"
		if other.readOnly {
			mode = "read-only"
		}
		if !closing {
			return nil, fmt.Errorf("%w: %w: %s (by another DB, %s). Close that DB first (what opened it closes it when it stops: an informer, a factory, a cache), or read a hot snapshot of it (DB.SnapshotFile on that DB)",
				ErrLocked, ErrOpenInProcess, path, mode)
		}
		if expired == nil {
			timer := time.NewTimer(opts.LockTimeout)
			defer timer.Stop()
			expired = timer.C
		}
		if opts.claimWaiting != nil {
			opts.claimWaiting(path)
		}
		select {
		case <-other.released:
		case <-expired:
			return nil, fmt.Errorf("%w: %w: %s (by another DB, %s), whose Close did not finish within %s",
				ErrLocked, ErrOpenInProcess, path, mode, opts.LockTimeout)
		}
	}
}

// opened records the file h's DB opened (created, perhaps), so that other
// paths to it are recognised.
func (h *holder) opened(path string) {
	info, err := os.Stat(path)
	if err != nil {
		return
	}
	holders.mu.Lock()
	h.info = info
	holders.mu.Unlock()
}

// close records that h's DB is closing. Its file's lock is about to be
// released, so a claim waits for it instead of failing.
func (h *holder) close() {
	holders.mu.Lock()
	h.closing = true
	holders.mu.Unlock()
}

// unclaim forgets h, once its DB released the file's lock.
func (h *holder) unclaim() {
	holders.mu.Lock()
	defer holders.mu.Unlock()
	holders.held = slices.DeleteFunc(holders.held, func(o *holder) bool { return o == h })
	close(h.released)
}
