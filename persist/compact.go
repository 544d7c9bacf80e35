package persist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CompactOptions configures Compact. Every zero value is a usable default.
type CompactOptions struct {
	// LockTimeout bounds the wait for src's lock, as Options.LockTimeout.
	LockTimeout time.Duration

	// PageSize is the page size of the new file. Zero means DefaultPageSize.
	PageSize int
}

// CompactStats reports what Compact did.
type CompactStats struct {
	SrcBytes, DstBytes int64
}

// Compact writes a compacted copy of the cache file src to dst. Every
// bucket is rewritten in key order with its pages filled. Free pages are
// dropped.
// A file that grew with churn or mass deletions shrinks to about what a
// fresh bulk load of the same objects takes.
//
// src must be a cache file no process is writing. Its lock is taken
// shared, waiting up to LockTimeout, and a running informer holds it
// exclusively. So stop the controller, or compact a snapshot
// (DB.SnapshotFile). dst must not exist. It is written through a temporary
// file in its directory, and renamed into place once complete and synced.
// So it never holds a partial copy. src is never changed. ctx is checked
// before the copy and before the rename. The copy itself runs to its end.
func Compact(ctx context.Context, src, dst string, opts CompactOptions) (CompactStats, error) {
	var stats CompactStats
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if _, err := os.Stat(dst); err == nil {
		return stats, fmt.Errorf("compacting %s: %s exists; name a new file (Compact never overwrites)", src, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return stats, fmt.Errorf("compacting %s: %w", src, err)
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	// Open through Open so that a locked, corrupt or foreign file is refused
	// with the errors Open gives, and nothing is created.
	in, err := Open(src, Options{ReadOnly: true, LockTimeout: opts.LockTimeout})
	if err != nil {
		return stats, fmt.Errorf("compacting: %w", err)
	}
	defer in.Close()
	if st, err := os.Stat(src); err == nil {
		stats.SrcBytes = st.Size()
	}

	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return stats, fmt.Errorf("compacting %s: %w", src, err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath) // after the rename, a no-op
	// bbolt initializes an empty file as a new database.
	out, err := bolt.Open(tmpPath, 0o600, &bolt.Options{
		PageSize:     opts.PageSize,
		FreelistType: bolt.FreelistMapType,
		NoSync:       true, // one fsync at the end instead of one per commit
	})
	if err != nil {
		return stats, fmt.Errorf("compacting %s: creating %s: %w", src, tmpPath, err)
	}
	const txMaxSize = 64 << 20 // bounds the memory of one copy transaction
	if err := bolt.Compact(out, in.bolt, txMaxSize); err != nil {
		out.Close()
		return stats, fmt.Errorf("compacting %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return stats, fmt.Errorf("compacting %s: syncing %s: %w", src, tmpPath, err)
	}
	if err := out.Close(); err != nil {
		return stats, fmt.Errorf("compacting %s: %w", src, err)
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	if err := os.Rename(tmpPath, dst); err != nil {
		return stats, fmt.Errorf("compacting %s: %w", src, err)
	}
	if st, err := os.Stat(dst); err == nil {
		stats.DstBytes = st.Size()
	}
	return stats, nil
}
