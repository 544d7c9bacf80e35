package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// stream reads protobuf fields from r as they arrive. It counts the bytes
// it consumed, so that an embedded message's end is known.
type stream struct {
	r    *bufio.Reader
	read int64
	// limit is the end of the innermost message being read, as an offset
	// in the stream; -1 while reading the outermost, which ends with the
	// stream. No field read crosses it.
	limit int64
	buf   []byte // the last length-delimited value too long to peek, reused
}

// maxField bounds one field read whole: an item, a ListMeta, a TypeMeta.
// etcd limits an object to the apiserver's 3 MiB request size; this leaves
// room.
const maxField = 64 << 20

// maxVarintLen is the longest varint protowire accepts.
const maxVarintLen = 10

// tag reads the next field's tag. At the limit, or with no limit at the
// stream's end, it reports done instead. The stream's end before a limit
// is a message cut short: io.ErrUnexpectedEOF within ErrMalformed, never a
// bare io.EOF, which callers take for a stream that closed normally.
func (s *stream) tag() (num protowire.Number, typ protowire.Type, done bool, err error) {
	if s.read == s.limit {
		return 0, 0, true, nil
	}
	v, err := s.varint()
	if err == io.EOF {
		if s.limit < 0 {
			return 0, 0, true, nil
		}
		return 0, 0, false, fmt.Errorf("%w: the stream ends %d bytes before its message's end: %w", ErrMalformed, s.limit-s.read, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return 0, 0, false, err
	}
	num, typ = protowire.DecodeTag(v)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, false, tagError(num, 0)
	}
	return num, typ, false, nil
}

// varint reads a varint. Its error is io.EOF, unwrapped, only at the
// stream's end before the varint's first byte; ErrMalformed otherwise.
// It peeks at the next maxVarintLen bytes, which wait for more of the
// stream only where a message's end is not at the stream's.
func (s *stream) varint() (uint64, error) {
	b, err := s.r.Peek(maxVarintLen)
	if len(b) == 0 {
		if err == io.EOF {
			return 0, io.EOF
		}
		return 0, truncated(err)
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		if len(b) < maxVarintLen && err != nil {
			return 0, truncated(err)
		}
		return 0, parseError("varint", n)
	}
	if s.limit >= 0 && s.read+int64(n) > s.limit {
		return 0, fmt.Errorf("%w: a varint crosses its message's end", ErrMalformed)
	}
	_, _ = s.r.Discard(n) // peeked: cannot fail
	s.read += int64(n)
	return v, nil
}

// length reads a length-delimited field's length, which must fit in the
// enclosing message.
func (s *stream) length(typ protowire.Type) (int64, error) {
	if typ != protowire.BytesType {
		return 0, errWireType
	}
	v, err := s.varint()
	if err == io.EOF {
		err = truncated(io.ErrUnexpectedEOF)
	}
	if err != nil {
		return 0, err
	}
	if v > 1<<62 || s.limit >= 0 && int64(v) > s.limit-s.read {
		return 0, fmt.Errorf("%w: bad length", ErrMalformed)
	}
	return int64(v), nil
}

// bytes reads a length-delimited field's payload. The payload is valid
// until the next read: a slice of the reader's buffer where it fits there,
// else s.buf, which the next call reuses.
func (s *stream) bytes(typ protowire.Type) ([]byte, error) {
	n, err := s.length(typ)
	if err != nil {
		return nil, err
	}
	if n <= int64(s.r.Size()) {
		// Peeked, the payload is copied once, from the connection into the
		// reader's buffer.
		b, err := s.r.Peek(int(n))
		if err != nil {
			return nil, truncated(err)
		}
		_, _ = s.r.Discard(int(n)) // peeked: cannot fail
		s.read += n
		return b, nil
	}
	if n > int64(cap(s.buf)) {
		if n > maxField {
			return nil, fmt.Errorf("%w: a field of %d bytes", ErrMalformed, n)
		}
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, truncated(err)
	}
	s.read += n
	return s.buf, nil
}

// skip reads past a field of wire type typ that is not read.
func (s *stream) skip(typ protowire.Type) error {
	var n int64
	switch typ {
	case protowire.VarintType:
		_, err := s.varint()
		if err == io.EOF {
			err = truncated(io.ErrUnexpectedEOF)
		}
		return err
	case protowire.Fixed64Type:
		n = 8
	case protowire.Fixed32Type:
		n = 4
	case protowire.BytesType:
		var err error
		if n, err = s.length(typ); err != nil {
			return err
		}
	default:
		return unsupported(typ)
	}
	if s.limit >= 0 && n > s.limit-s.read {
		return fmt.Errorf("%w: a field crosses its message's end", ErrMalformed)
	}
	m, err := s.r.Discard(int(n))
	s.read += int64(m)
	if err != nil {
		return truncated(err)
	}
	return nil
}

// truncated wraps a read error inside a message as ErrMalformed: a stream
// cut short is not a shorter message.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}
