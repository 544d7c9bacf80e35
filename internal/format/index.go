package format

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// An index bucket holds two sub-buckets:
//
//	byValue: ValuePrefix(value) + objectKey -> nil   (lookups by value)
//	byKey:   objectKey -> msgpack []string          (the values last written, so a
//	                                                  commit can remove them without
//	                                                  decoding the old object)
//
// ValuePrefix is uvarint(len(value)) + value: no value's prefix is a prefix of
// another's, so a prefix scan returns exactly one value's keys whatever bytes
// values and keys contain, and all keys of a value are adjacent.
var (
	ByValueBucket = []byte("byValue")
	ByKeyBucket   = []byte("byKey")
)

// ValuePrefix returns the prefix of every byValue entry of value.
func ValuePrefix(value string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(value))
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

// IndexEntry returns the byValue entry that maps value to key.
func IndexEntry(value, key string) []byte {
	return append(ValuePrefix(value), key...)
}

// SplitIndexEntry returns the value and object key of a byValue entry, and
// the length of the value prefix. A malformed entry is an error wrapping
// ErrCorruptRecord.
func SplitIndexEntry(entry []byte) (value, key string, prefixLen int, err error) {
	n, w := binary.Uvarint(entry)
	if w <= 0 || uint64(len(entry)-w) < n {
		return "", "", 0, fmt.Errorf("%w: malformed index entry %q", ErrCorruptRecord, entry)
	}
	end := w + int(n)
	return string(entry[w:end]), string(entry[end:]), end, nil
}

// DecodeIndexValues decodes a byKey value: the index values of a key.
func DecodeIndexValues(raw []byte) ([]string, error) {
	var values []string
	if err := msgpack.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%w: index values %q: %v", ErrCorruptRecord, raw, err)
	}
	return values, nil
}
