package persist

import (
	"encoding/binary"
	"fmt"
)

// An index bucket holds two sub-buckets:
//
//	byValue: valuePrefix(value) + objectKey -> nil   (lookups by value)
//	byKey:   objectKey -> msgpack []string          (the values last written, so a
//	                                                  commit can remove them without
//	                                                  decoding the old object)
//
// valuePrefix is uvarint(len(value)) + value: no value's prefix is a prefix of
// another's, so a prefix scan returns exactly one value's keys whatever bytes
// values and keys contain, and all keys of a value are adjacent.
var (
	bucketByValue = []byte("byValue")
	bucketByKey   = []byte("byKey")
)

func valuePrefix(value string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(value))
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

func indexEntry(value, key string) []byte {
	return append(valuePrefix(value), key...)
}

// splitIndexEntry returns the value and object key of a byValue entry, and the
// length of the value prefix.
func splitIndexEntry(entry []byte) (value, key string, prefixLen int, err error) {
	n, w := binary.Uvarint(entry)
	if w <= 0 || uint64(len(entry)-w) < n {
		return "", "", 0, fmt.Errorf("%w: malformed index entry %q", ErrCorruptRecord, entry)
	}
	end := w + int(n)
	return string(entry[w:end]), string(entry[end:]), end, nil
}
