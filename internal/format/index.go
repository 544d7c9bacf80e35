package format

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// An index bucket holds two sub-buckets:
//
//	byValue: valuePrefix(value) + objectKey -> nil, or value   (lookups by value)
//	byKey:   objectKey -> msgpack []string                    (the values last written, so a
//	                                                           commit can remove them without
//	                                                           decoding the old object)
//
// A value of at most MaxInlineValue bytes has the prefix uvarint(len(value))
// + value, and its entries hold nil. A longer value would make a key beyond
// bbolt's limit (bolt.MaxKeySize), and index values come from object
// content. So its prefix is uvarint(hashedLength + len(value)) +
// SHA-256(value), and its entries hold the value itself. Lookups compare
// that value, so they stay exact whatever the hash. No inline length reaches
// hashedLength, so the two forms never share a prefix. No value's prefix is
// a prefix of another's, so a prefix scan returns exactly one value's keys,
// and all keys of a value are adjacent.
//
// Builds before the hashed form wrote inline every value whose entry fit
// within bolt.MaxKeySize. Such an entry of a value now hashed is still read
// (ForEachIndexKey, HasIndexEntry) and still removed (IndexEntryKeys).
var (
	ByValueBucket = []byte("byValue")
	ByKeyBucket   = []byte("byKey")
	// ByValueOwedKey, in CollMetaBucket, is set while the collection's
	// byValue buckets may lack entries and hold stale ones (schema 5).
	// byKey is the index then. It is set only while the collection has no
	// resourceVersion. It is deleted when byValue is built afresh from
	// byKey.
	ByValueOwedKey = []byte("byValueOwed")
)

// MaxObjectKey is the longest object key a collection stores, in bytes. A
// Kubernetes namespace/name key is at most 317 bytes (63 + 1 + 253). The
// bound leaves room in every byValue entry for an inline value.
const MaxObjectKey = 4096

// MaxInlineValue is the longest index value stored inline in its byValue
// entries. With the 3-byte length of such a value and a key of
// MaxObjectKey bytes, an entry is exactly bolt.MaxKeySize bytes.
const MaxInlineValue = bolt.MaxKeySize - 3 - MaxObjectKey

// hashedLength marks a hashed prefix. Its length field is hashedLength
// plus the value's length, beyond any inline length ever written.
const hashedLength = 1 << 32

// legacyMaxInline is the longest value an older build may have written
// inline: a 3-byte length and a 1-byte key filled bolt.MaxKeySize.
const legacyMaxInline = bolt.MaxKeySize - 3 - 1

// valuePrefix returns the prefix of every byValue entry of value that this
// build writes.
func valuePrefix(value string) []byte {
	if len(value) > MaxInlineValue {
		return hashedPrefix(value)
	}
	return inlinePrefix(value)
}

func inlinePrefix(value string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(value))
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

func hashedPrefix(value string) []byte {
	sum := sha256.Sum256([]byte(value))
	b := make([]byte, 0, binary.MaxVarintLen64+len(sum))
	b = binary.AppendUvarint(b, hashedLength+uint64(len(value)))
	return append(b, sum[:]...)
}

// indexPrefix is a prefix under which a value's entries may be stored.
type indexPrefix struct {
	prefix []byte
	hashed bool // the entries hold the value, which a lookup compares
}

// indexPrefixes returns the prefixes under which value's entries may be
// stored. That is valuePrefix, and for a value now hashed, the inline
// prefix an older build may have written.
func indexPrefixes(value string) []indexPrefix {
	if len(value) <= MaxInlineValue {
		return []indexPrefix{{prefix: inlinePrefix(value)}}
	}
	out := []indexPrefix{{prefix: hashedPrefix(value), hashed: true}}
	if len(value) <= legacyMaxInline {
		out = append(out, indexPrefix{prefix: inlinePrefix(value)})
	}
	return out
}

// IndexEntry returns the byValue entry that maps value to key: the bbolt
// key and the bbolt value to put. key must be at most MaxObjectKey bytes.
func IndexEntry(value, key string) (k, v []byte) {
	k = append(valuePrefix(value), key...)
	if len(value) > MaxInlineValue {
		v = []byte(value)
	}
	return k, v
}

// IndexEntryKeys returns every bbolt key under which an entry mapping value
// to key may be stored. A writer that removes the mapping deletes them all.
func IndexEntryKeys(value, key string) [][]byte {
	prefixes := indexPrefixes(value)
	keys := make([][]byte, 0, len(prefixes))
	for _, p := range prefixes {
		if len(p.prefix)+len(key) <= bolt.MaxKeySize { // a longer one was never written
			keys = append(keys, append(p.prefix, key...))
		}
	}
	return keys
}

// ForEachIndexKey calls fn with the object key of every byValue entry of
// value in the bucket, until fn returns an error, which it returns. The
// key aliases the transaction's memory.
func ForEachIndexKey(byValue *bolt.Bucket, value string, fn func(key []byte) error) error {
	for _, p := range indexPrefixes(value) {
		cur := byValue.Cursor()
		for k, v := cur.Seek(p.prefix); k != nil && bytes.HasPrefix(k, p.prefix); k, v = cur.Next() {
			if p.hashed && string(v) != value {
				continue // another value with the same hash
			}
			if err := fn(k[len(p.prefix):]); err != nil {
				return err
			}
		}
	}
	return nil
}

// HasIndexEntry reports whether the bucket maps value to key.
func HasIndexEntry(byValue *bolt.Bucket, value, key string) bool {
	for _, k := range IndexEntryKeys(value, key) {
		got, v := byValue.Cursor().Seek(k)
		if got == nil || !bytes.Equal(got, k) {
			continue
		}
		if len(v) == 0 || string(v) == value {
			return true
		}
	}
	return false
}

// DecodeIndexEntry returns the value and object key of the byValue entry
// k, v, and the length of the value's prefix. A malformed entry is an error
// wrapping ErrCorruptRecord. So is a hashed entry whose value does not have
// its hash, and an entry that names no object key.
func DecodeIndexEntry(k, v []byte) (value, key string, prefixLen int, err error) {
	val, objKey, prefixLen, err := parseIndexEntry(k, v)
	if err != nil {
		return "", "", 0, err
	}
	return string(val), string(objKey), prefixLen, nil
}

// CheckIndexEntry returns the error DecodeIndexEntry would, without
// copying the entry's value and key.
func CheckIndexEntry(k, v []byte) error {
	_, _, _, err := parseIndexEntry(k, v)
	return err
}

// parseIndexEntry is DecodeIndexEntry with the value and key aliasing k
// and v.
func parseIndexEntry(k, v []byte) (value, key []byte, prefixLen int, err error) {
	n, w := binary.Uvarint(k)
	if w <= 0 {
		return nil, nil, 0, fmt.Errorf("%w: malformed index entry %q", ErrCorruptRecord, shorten(k))
	}
	if n >= hashedLength {
		end := w + sha256.Size
		switch {
		case len(k) < end:
			return nil, nil, 0, fmt.Errorf("%w: index entry %q is shorter than its hash", ErrCorruptRecord, shorten(k))
		case uint64(len(v)) != n-hashedLength:
			return nil, nil, 0, fmt.Errorf("%w: index entry %q holds a value of %d bytes, its key says %d", ErrCorruptRecord, shorten(k), len(v), n-hashedLength)
		case len(k) == end:
			return nil, nil, 0, fmt.Errorf("%w: index entry %q names no object", ErrCorruptRecord, shorten(k))
		}
		if sum := sha256.Sum256(v); !bytes.Equal(sum[:], k[w:end]) {
			return nil, nil, 0, fmt.Errorf("%w: index entry %q holds a value without the entry's hash", ErrCorruptRecord, shorten(k))
		}
		return v, k[end:], end, nil
	}
	if uint64(len(k)-w) < n {
		return nil, nil, 0, fmt.Errorf("%w: malformed index entry %q", ErrCorruptRecord, shorten(k))
	}
	if len(v) != 0 {
		return nil, nil, 0, fmt.Errorf("%w: index entry %q of an inline value holds %d bytes", ErrCorruptRecord, shorten(k), len(v))
	}
	end := w + int(n)
	if len(k) == end {
		return nil, nil, 0, fmt.Errorf("%w: index entry %q names no object", ErrCorruptRecord, shorten(k))
	}
	return k[w:end], k[end:], end, nil
}

// shorten returns b, or its first bytes if it is too long for a message.
func shorten(b []byte) []byte {
	const most = 256
	if len(b) <= most {
		return b
	}
	return b[:most]
}

// DecodeIndexValues decodes a byKey value: the index values of a key.
func DecodeIndexValues(raw []byte) ([]string, error) {
	var values []string
	if err := msgpack.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%w: index values %q: %v", ErrCorruptRecord, shorten(raw), err)
	}
	return values, nil
}

// CheckIndexValues returns an error wrapping ErrCorruptRecord unless raw is
// a byKey value DecodeIndexValues decodes. It decodes nothing, so a check
// of every value allocates nothing. It accepts only what msgpack writes for
// a []string: nil, or an array of strings with nothing after it. Every
// value it accepts decodes, and it refuses a few that would.
func CheckIndexValues(raw []byte) error {
	n, rest, ok := msgpackArrayLen(raw)
	for ; ok && n > 0; n-- {
		rest, ok = skipMsgpackString(rest)
	}
	if !ok || len(rest) != 0 {
		return fmt.Errorf("%w: index values %q are not an array of strings", ErrCorruptRecord, shorten(raw))
	}
	return nil
}

// msgpackArrayLen reads the header of a msgpack array, or nil, at the start
// of b. It returns the element count and what follows the header.
func msgpackArrayLen(b []byte) (n uint64, rest []byte, ok bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	c := b[0]
	switch {
	case c == 0xc0: // nil
		return 0, b[1:], true
	case c >= 0x90 && c <= 0x9f: // fixarray
		return uint64(c & 0x0f), b[1:], true
	case c == 0xdc && len(b) >= 3: // array 16
		return uint64(binary.BigEndian.Uint16(b[1:])), b[3:], true
	case c == 0xdd && len(b) >= 5: // array 32
		return uint64(binary.BigEndian.Uint32(b[1:])), b[5:], true
	}
	return 0, nil, false
}

// skipMsgpackString returns what follows the msgpack string at the start of
// b, which must hold all of it.
func skipMsgpackString(b []byte) (rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, false
	}
	c := b[0]
	var n uint64
	var w int
	switch {
	case c >= 0xa0 && c <= 0xbf: // fixstr
		n, w = uint64(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2: // str 8
		n, w = uint64(b[1]), 2
	case c == 0xda && len(b) >= 3: // str 16
		n, w = uint64(binary.BigEndian.Uint16(b[1:])), 3
	case c == 0xdb && len(b) >= 5: // str 32
		n, w = uint64(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, false
	}
	if uint64(len(b)-w) < n {
		return nil, false
	}
	return b[w+int(n):], true
}

// RawIndexEntry is a byValue entry: its bbolt key and value.
type RawIndexEntry struct{ K, V []byte }

// IndexEntriesOf returns the byValue entries that byKey's values give, in
// byValue's order. It is what byValue holds when it is not owed
// (ByValueOwedKey). A value that does not decode, or a bucket where a
// value belongs, gives no entries: it is damage, which whoever reads byKey
// meets and reports.
func IndexEntriesOf(byKey *bolt.Bucket) []RawIndexEntry {
	var entries []RawIndexEntry
	_ = byKey.ForEach(func(k, raw []byte) error {
		values, err := DecodeIndexValues(raw)
		if raw == nil || err != nil {
			return nil
		}
		for _, v := range values {
			ek, ev := IndexEntry(v, string(k))
			entries = append(entries, RawIndexEntry{ek, ev})
		}
		return nil
	})
	slices.SortFunc(entries, func(a, b RawIndexEntry) int { return bytes.Compare(a.K, b.K) })
	return entries
}
