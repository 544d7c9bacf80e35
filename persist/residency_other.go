//go:build !linux

package persist

// ReleaseMappedPages drops the file's pages from this process's resident
// set on Linux; elsewhere it does nothing.
func (db *DB) ReleaseMappedPages() error { return nil }
