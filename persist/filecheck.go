// Reaches into go.etcd.io/bbolt internal/common/meta.go at v1.5.0: the
// layout of the meta page (magic, version, pageSize, freelist, pgid, txid,
// FNV-64a checksum over the fields before it, native byte order).
// Reaches into go.etcd.io/bbolt internal/common/page.go at v1.5.0: the page
// header (16 bytes) before the meta.
//
// bbolt has no public check of a file's length against its metadata; it
// maps and reads the file, and a truncated one kills the process (SIGBUS).
// If the layout changed, no meta reads as valid and checkFile leaves the
// file to bbolt unchecked (the protection is lost, nothing else); Open
// reports it when bbolt then opens the file after all:
// TestTruncatedFileIsDetectedAndCanBeMovedAside pins the layout.

package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// checkFile guards bbolt.Open against a truncated file. bbolt maps the file
// and reads pages its metadata points to. When the file is shorter than
// that, the read faults (SIGBUS) and kills the process. No recover can catch
// that. So before opening, checkFile reads bbolt's two meta pages the way
// bbolt does (go.etcd.io/bbolt internal/common/meta.go, native byte order).
// It checks that the file holds every page the newest valid meta claims.
//
// A file with no valid meta is left to bbolt, which reports it as invalid.
// unread reports that case. If bbolt then opens the file, this check no
// longer understands bbolt's layout.
func checkFile(path string) (unread bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	m0, ok0 := readMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if ok0 {
		pageSize = int64(m0.pageSize)
	}
	m1, ok1 := readMeta(f, pageSize)
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return true, nil
	}
	need := int64(m.pgid) * int64(m.pageSize)
	if m.pgid == 0 || need/int64(m.pageSize) != int64(m.pgid) || st.Size() < need {
		return false, fmt.Errorf("%w: %s is %d bytes but its metadata (transaction %d) needs %d: the file is truncated. Move it aside (keep it for inspect) and start cold, or set Options.MoveAsideCorrupt",
			ErrCorrupt, path, st.Size(), m.txid, need)
	}
	if m.freelist != noFreelist && m.freelist >= m.pgid {
		return false, fmt.Errorf("%w: %s: freelist page %d beyond the file's %d pages", ErrCorrupt, path, m.freelist, m.pgid)
	}
	return false, nil
}

// bboltLayoutVersion is the bbolt release whose meta layout readMeta reads.
const bboltLayoutVersion = "v1.5.0"

const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16 // pgid(8) flags(2) count(2) overflow(4)
	metaChecksumSpan = 56 // bytes of the meta covered by its checksum
	noFreelist       = ^uint64(0)
)

// boltMeta is the part of bbolt's meta page this check needs.
type boltMeta struct {
	pageSize uint32
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta reads the meta page at offset and reports whether it is valid
// (magic, version and checksum), as bbolt's Meta.Validate decides.
func readMeta(r io.ReaderAt, offset int64) (boltMeta, bool) {
	buf := make([]byte, pageHeaderSize+metaChecksumSpan+8)
	if _, err := r.ReadAt(buf, offset); err != nil {
		return boltMeta{}, false
	}
	meta := buf[pageHeaderSize:]
	ne := binary.NativeEndian
	if ne.Uint32(meta[0:]) != boltMagic || ne.Uint32(meta[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(meta[:metaChecksumSpan])
	if h.Sum64() != ne.Uint64(meta[metaChecksumSpan:]) {
		return boltMeta{}, false
	}
	// magic(4) version(4) pageSize(4) flags(4) root{pgid(8) sequence(8)}
	// freelist(8) pgid(8) txid(8)
	return boltMeta{
		pageSize: ne.Uint32(meta[8:]),
		freelist: ne.Uint64(meta[32:]),
		pgid:     ne.Uint64(meta[40:]),
		txid:     ne.Uint64(meta[48:]),
	}, true
}
