package persist

import "github.com/boltinformer/boltinformer/internal/format"

// A record is the msgpack envelope that internal/format describes (format.Header
// and the payload encoded by Codec); the envelope code lives there so that
// read-only tools share it.

// ReadResourceVersion returns the resourceVersion stored in a record (as
// Codec.Encode makes it) without decoding the rest of it. A record that does
// not parse is an error wrapping ErrCorruptRecord.
func ReadResourceVersion(record []byte) (string, error) {
	return format.ReadResourceVersion(record)
}
