package format

import (
	"encoding/binary"
	"fmt"
)

// A tombstone (TombstonesBucket/<checkpoint>/<key>) is what a checkpoint
// keeps of a deleted object whose deletion its consumer has not
// acknowledged: the object's last stored record and, where the deletion
// came with the deleted object (a watch's DELETED event), that object's
// resourceVersion — the version the consumer's OnDelete was given, which is
// how an acknowledgement of the deletion is told from a late one of an
// earlier state.
//
//	tombstoneMagic, uvarint len(deletedAt), deletedAt, record
//
// A value that starts with a record (a msgpack array) is a tombstone
// written before deletedAt was kept: the deletion's version is unknown.
const tombstoneMagic = 0xc1 // msgpack's "never used" byte: no record starts with it

// Tombstone is a decoded tombstone.
type Tombstone struct {
	// DeletedAt is the resourceVersion of the deleted object as its
	// deletion was delivered; empty if unknown (a deletion found by a
	// relist, or a tombstone written before it was kept).
	DeletedAt string
	// Record is the object's last stored record.
	Record []byte
}

// AppendTombstone appends t's encoding to dst.
func AppendTombstone(dst []byte, t Tombstone) []byte {
	dst = append(dst, tombstoneMagic)
	dst = binary.AppendUvarint(dst, uint64(len(t.DeletedAt)))
	dst = append(dst, t.DeletedAt...)
	return append(dst, t.Record...)
}

// DecodeTombstone decodes a tombstone; Record aliases raw.
func DecodeTombstone(raw []byte) (Tombstone, error) {
	if len(raw) == 0 {
		return Tombstone{}, fmt.Errorf("%w: empty tombstone", ErrCorruptRecord)
	}
	if raw[0] != tombstoneMagic {
		return Tombstone{Record: raw}, nil // written before DeletedAt was kept
	}
	rest := raw[1:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return Tombstone{}, fmt.Errorf("%w: tombstone: deletion version length", ErrCorruptRecord)
	}
	return Tombstone{DeletedAt: string(rest[w : w+int(n)]), Record: rest[w+int(n):]}, nil
}
