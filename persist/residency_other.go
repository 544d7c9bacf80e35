//go:build !linux

package persist

// ReleaseMappedPages drops the file's pages from this process's resident
// set on Linux. Elsewhere it does nothing.
func (db *DB) ReleaseMappedPages() error { return nil }
