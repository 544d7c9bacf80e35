package format

import (
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Every entry IndexEntry makes fits a bbolt key, and decodes to its value
// and key. A hashed entry whose value lacks its hash does not decode.
func TestIndexEntryRoundTrip(t *testing.T) {
	keys := []string{"k", "ns/a/b", "\x00\xff", strings.Repeat("k", MaxObjectKey)}
	for _, n := range []int{0, 1, 127, 128, MaxInlineValue - 1, MaxInlineValue, MaxInlineValue + 1, legacyMaxInline, bolt.MaxKeySize, 100 << 10} {
		value := strings.Repeat("\x01", n)
		for _, key := range keys {
			k, v := IndexEntry(value, key)
			if len(k) > bolt.MaxKeySize {
				t.Fatalf("value of %d bytes, key of %d: entry of %d bytes, over bbolt's limit", n, len(key), len(k))
			}
			gotValue, gotKey, prefixLen, err := DecodeIndexEntry(k, v)
			if err != nil || gotValue != value || gotKey != key {
				t.Fatalf("value of %d bytes, key of %d: decoded %d bytes, key of %d, %v", n, len(key), len(gotValue), len(gotKey), err)
			}
			if prefixLen+len(key) != len(k) {
				t.Fatalf("value of %d bytes: prefix of %d bytes in an entry of %d with a key of %d", n, prefixLen, len(k), len(key))
			}
			if len(v) == 0 {
				continue
			}
			tampered := []byte(strings.Repeat("\x02", n))
			if _, _, _, err := DecodeIndexEntry(k, tampered); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("value of %d bytes: an entry holding another value decoded (%v)", n, err)
			}
		}
	}
}
