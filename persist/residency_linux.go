package persist

import (
	"fmt"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// ReleaseMappedPages drops the file's pages from this process's resident
// set. They stay in the kernel's page cache — they are clean, since bbolt
// writes through the file and maps it read-only — so a later read faults
// its page back in without I/O while the node has memory to spare, and the
// kernel may reclaim them under pressure instead of counting them against
// this process. An informer with a bounded object cache calls it after a
// warm start has walked every record once: its RSS then shows the objects
// it keeps, not the file it walked.
//
// Safe while other goroutines read: the read transaction it holds keeps
// bbolt from remapping, and a dropped page is simply faulted in again.
func (db *DB) ReleaseMappedPages() error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		// tx.Size is the file's high-water mark, within the mapping.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, db.bolt.Info().Data, uintptr(tx.Size()), syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("releasing the mapped pages of %s: %w", db.path, errno)
		}
		return nil
	})
}
