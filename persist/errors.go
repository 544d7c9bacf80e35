package persist

import (
	"errors"
	"fmt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// Errors returned by this package. Callers test them with errors.Is. The
// returned errors wrap them with the file, collection or key at fault.
var (
	// ErrLocked means the file's lock is held. Either another process did
	// not release it within Options.LockTimeout, or another DB of this
	// process holds it. Open reports the latter at once, with
	// ErrOpenInProcess too.
	ErrLocked = errors.New("cache file is locked")

	// ErrOpenInProcess means another DB of this process holds the file, for
	// writing, or read-only when opening for writing. It comes with
	// ErrLocked. Waiting would not help, because that DB must be closed
	// first.
	ErrOpenInProcess = errors.New("already open in this process")

	// ErrSchemaUnsupported means the file was written by a newer (or unknown)
	// version of boltinformer. This build cannot read it safely.
	ErrSchemaUnsupported = errors.New("unsupported cache file schema")

	// ErrNotCacheFile means the file is a bbolt file but not a boltinformer cache.
	ErrNotCacheFile = errors.New("not a boltinformer cache file")

	// ErrCorrupt means the file could not be opened as a bbolt database.
	ErrCorrupt = errors.New("cache file is corrupt")

	// ErrCorruptRecord means a stored record or index entry could not be
	// decoded.
	ErrCorruptRecord = format.ErrCorruptRecord

	// ErrUnencodable means an object could not be encoded. Nothing was
	// applied.
	ErrUnencodable = errors.New("object cannot be encoded")

	// ErrUnknownType means a record names a type the codec's scheme does not know.
	ErrUnknownType = errors.New("record type not in scheme")

	// ErrReadOnly means a write was attempted on a DB opened read-only.
	ErrReadOnly = errors.New("cache file is open read-only")

	// ErrClosed means the DB, the collection or the checkpoint was closed.
	ErrClosed = errors.New("cache file is closed")

	// ErrNoCollection means a read-only open asked for a collection the file lacks.
	ErrNoCollection = errors.New("no such collection")
)

// noIndexError is client-go's error for an index that does not exist,
// verbatim. Callers may match its text.
func noIndexError(name string) error {
	//lint:ignore ST1005 client-go's message, verbatim (callers may match it)
	return fmt.Errorf("Index with name %s does not exist", name)
}

// UnreadableRecordsError is AddIndexes's error for stored records that do
// not decode. An index cannot be built without them, so none was added,
// and the records are still stored. It wraps ErrCorruptRecord.
type UnreadableRecordsError struct {
	// Keys are the keys of the records, in key order.
	Keys []string
	// Err says why each record does not decode.
	Err error
}

func (e *UnreadableRecordsError) Error() string {
	return fmt.Sprintf("stored records cannot be read back (%d of them), so no index was added and the records were kept: %v", len(e.Keys), e.Err)
}

func (e *UnreadableRecordsError) Unwrap() error { return e.Err }
