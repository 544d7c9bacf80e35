package format

import (
	"encoding/binary"
	"fmt"
)

// VersionsBucket (schema 3), below a collection's bucket, maps each object
// key in ObjectsBucket to the object's UID and resourceVersion:
//
//	uvarint len(uid), uid, resourceVersion
//
// It is written with ObjectsBucket (a fold, a bulk commit), so that a
// collection's identities are read without touching its records' pages:
// about 60 bytes a key, where a record is kilobytes. Journal entries carry
// the same two fields (see JournalEntry). A collection without the bucket
// (written by schema 2) has it built from its records when first opened
// for writing.
var VersionsBucket = []byte("versions")

// AppendVersion appends the encoding of uid and rv to dst.
func AppendVersion(dst []byte, uid, rv string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(uid)))
	dst = append(dst, uid...)
	return append(dst, rv...)
}

// DecodeVersion decodes a VersionsBucket value.
func DecodeVersion(raw []byte) (uid, rv string, err error) {
	u, r, err := SplitVersion(raw)
	return string(u), string(r), err
}

// SplitVersion is DecodeVersion with uid and rv aliasing raw, so that a
// check of every value allocates nothing.
func SplitVersion(raw []byte) (uid, rv []byte, err error) {
	n, w := binary.Uvarint(raw)
	if w <= 0 || uint64(len(raw)-w) < n {
		return nil, nil, fmt.Errorf("%w: version entry", ErrCorruptRecord)
	}
	return raw[w : w+int(n)], raw[w+int(n):], nil
}
