package format

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrCorruptRecord means a stored record or index entry could not be
// decoded. persist exports it as persist.ErrCorruptRecord.
var ErrCorruptRecord = errors.New("corrupt record")

// recordVersion is the version of the envelope layout below. It changes only
// together with schemaVersion.
const recordVersion = 1

// Encoding names the codec of a record's payload.
type Encoding uint8

const (
	// EncodingProtobuf is the Kubernetes generated protobuf message of a typed
	// object (its Marshal/Unmarshal methods, without the runtime.Unknown wrapper).
	EncodingProtobuf Encoding = 1
	// EncodingJSON is encoding/json of a typed object that has no protobuf methods.
	EncodingJSON Encoding = 2
	// EncodingUnstructured is the msgpack of an *unstructured.Unstructured's
	// content (see persist/content.go).
	EncodingUnstructured Encoding = 3
)

func (e Encoding) String() string {
	switch e {
	case EncodingProtobuf:
		return "protobuf"
	case EncodingJSON:
		return "json"
	case EncodingUnstructured:
		return "unstructured-msgpack"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// Header is the part of a record that describes the object without its payload.
// Reading it never decodes the object.
type Header struct {
	// ResourceVersion of the stored object.
	ResourceVersion string
	// Encoding of the payload.
	Encoding Encoding
	// Type is the scheme GroupVersionKind ("group/version, Kind=K") that names the Go
	// type to decode into; empty for unstructured objects.
	Type string
	// APIVersion and Kind are the object's TypeMeta exactly as it was stored
	// (typed clients deliver objects with an empty TypeMeta).
	APIVersion string
	Kind       string
}

// A record is a msgpack array:
//
//	[recordVersion, resourceVersion, encoding, type, apiVersion, kind, payload]
//
// resourceVersion comes first so that ReadResourceVersion stops after two
// fields; payload comes last so that it can be sliced out of the record
// without copying.
const recordFields = 7

var encoderPool = sync.Pool{New: func() any {
	buf := new(bytes.Buffer)
	return &recordEncoder{buf: buf, enc: msgpack.NewEncoder(buf)}
}}

type recordEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// AppendRecordTo returns the record for h whose payload of size n is
// written by fill into the record's tail. It writes over buf when buf has
// the capacity (for a caller that recycles record buffers), else into a
// fresh slice. A fresh slice's capacity may exceed the record's length.
func AppendRecordTo(buf []byte, h Header, n int, fill func(payload []byte) error) ([]byte, error) {
	re := encoderPool.Get().(*recordEncoder)
	defer encoderPool.Put(re)
	re.buf.Reset()
	e := re.enc
	if err := firstErr(
		e.EncodeArrayLen(recordFields),
		e.EncodeUint8(recordVersion),
		e.EncodeString(h.ResourceVersion),
		e.EncodeUint8(uint8(h.Encoding)),
		e.EncodeString(h.Type),
		e.EncodeString(h.APIVersion),
		e.EncodeString(h.Kind),
		e.EncodeBytesLen(n),
	); err != nil {
		return nil, err
	}
	size := re.buf.Len() + n
	var out []byte
	switch {
	case cap(buf) >= size:
		out = buf[:size]
	case buf == nil:
		// The allocator rounds a buffer up to its size class anyway. Keeping
		// that room in the capacity lets the buffer, once recycled, take a
		// slightly larger record at no cost in memory.
		out = append([]byte(nil), make([]byte, size)...)[:size]
	default:
		// A recycled buffer too small for this record is dropped. Its
		// replacement gets a quarter to spare, so that the buffers a store
		// recycles grow to fit the spread of its records' sizes.
		out = append([]byte(nil), make([]byte, size+size/4)...)[:size]
	}
	copy(out, re.buf.Bytes())
	if err := fill(out[re.buf.Len():]); err != nil {
		return nil, err
	}
	return out, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var decoderPool = sync.Pool{New: func() any { return &recordDecoder{dec: msgpack.NewDecoder(nil)} }}

type recordDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

// ReadResourceVersion returns the resourceVersion stored in a record without
// decoding the rest of it.
func ReadResourceVersion(record []byte) (string, error) {
	rd := decoderPool.Get().(*recordDecoder)
	defer decoderPool.Put(rd)
	rd.r.Reset(record)
	rd.dec.Reset(&rd.r)
	if err := readPreamble(rd.dec); err != nil {
		return "", err
	}
	rv, err := rd.dec.DecodeString()
	if err != nil {
		return "", fmt.Errorf("%w: resourceVersion: %v", ErrCorruptRecord, err)
	}
	return rv, nil
}

// ReadHeader splits a record into its header and payload. The payload aliases
// record: it is valid only as long as record is.
func ReadHeader(record []byte) (Header, []byte, error) {
	rd := decoderPool.Get().(*recordDecoder)
	defer decoderPool.Put(rd)
	rd.r.Reset(record)
	d := rd.dec
	d.Reset(&rd.r)
	var h Header
	if err := readPreamble(d); err != nil {
		return h, nil, err
	}
	var enc uint8
	var err error
	if h.ResourceVersion, err = d.DecodeString(); err == nil {
		if enc, err = d.DecodeUint8(); err == nil {
			if h.Type, err = d.DecodeString(); err == nil {
				if h.APIVersion, err = d.DecodeString(); err == nil {
					h.Kind, err = d.DecodeString()
				}
			}
		}
	}
	if err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", ErrCorruptRecord, err)
	}
	h.Encoding = Encoding(enc)
	n, err := d.DecodeBytesLen()
	if err != nil {
		return h, nil, fmt.Errorf("%w: payload: %v", ErrCorruptRecord, err)
	}
	// bytes.Reader.Len is what the decoder has not consumed; the msgpack
	// decoder reads through a bufio-free path for a *bytes.Reader, so the
	// payload starts exactly there.
	if n < 0 || rd.r.Len() != n {
		return h, nil, fmt.Errorf("%w: payload is %d bytes, record holds %d", ErrCorruptRecord, n, rd.r.Len())
	}
	return h, record[len(record)-n:], nil
}

func readPreamble(d *msgpack.Decoder) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if n != recordFields {
		return fmt.Errorf("%w: envelope has %d fields, want %d", ErrCorruptRecord, n, recordFields)
	}
	v, err := d.DecodeUint8()
	if err != nil {
		return fmt.Errorf("%w: version: %v", ErrCorruptRecord, err)
	}
	if v != recordVersion {
		return fmt.Errorf("%w: record version %d, this build reads %d", ErrCorruptRecord, v, recordVersion)
	}
	return nil
}
