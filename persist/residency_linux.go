// Reaches into go.etcd.io/bbolt db.go at v1.5.0: DB.Info().Data, the
// address of bbolt's mapping of the file (&db.data[0]), taken to be the
// start of one mapping that covers at least tx.Size() bytes while a read
// transaction is open.
// Reaches into go.etcd.io/bbolt bolt_unix.go at v1.5.0: that the mapping
// is the file's, read-only and shared (mmap PROT_READ, MAP_SHARED), so its
// pages are clean and MADV_DONTNEED only drops them from the resident set.
//
// bbolt has no public call to release its mapped pages. Nothing checks these
// assumptions at run time: were the mapping private, anonymous or elsewhere,
// MADV_DONTNEED would discard memory rather than clean file pages. That is
// why a bbolt upgrade fails hack/check-upstream-versions.sh until someone has
// read both files again; TestReleaseMappedPages pins the behaviour.

package persist

import (
	"fmt"
	"unsafe"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ReleaseMappedPages drops the file's pages from this process's resident
// set. They stay in the kernel's page cache. They are clean, since bbolt
// writes through the file and maps it read-only. So a later read faults its
// page back in without I/O while the node has memory to spare. Under
// pressure, the kernel may reclaim them instead of counting them against
// this process. An informer with a bounded object cache calls it after a
// warm start has walked every record once. Its RSS then shows the objects
// it keeps, not the file it walked.
//
// It is safe while other goroutines read. The read transaction it holds
// keeps bbolt from remapping, and a dropped page is simply faulted in
// again.
func (db *DB) ReleaseMappedPages() error {
	return db.view(func(tx *bolt.Tx) error {
		// bbolt reports its read-only mapping by address. tx.Size is the
		// file's high-water mark, within the mapping.
		mapped := unsafe.Slice((*byte)(unsafe.Add(nil, db.bolt.Info().Data)), tx.Size())
		if err := unix.Madvise(mapped, unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("releasing the mapped pages of %s: %w", db.path, err)
		}
		return nil
	})
}
