// Reaches into k8s.io/apimachinery pkg/runtime/serializer/protobuf/collections.go at v0.37.2:
// the layout wirelist.go reads (protobuf.go), as the streaming list encoder
// writes it, read as it arrives.

package recovery

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// scanProtobufListStream reads a list in Kubernetes protobuf (the layout in
// wirelist.go) from r as it arrives, and calls item with each item's
// identity and raw bytes, which are valid only until item returns: they are
// read into one buffer, reused (copy what is kept). It returns the list
// without items. Memory stays at one item's size however long the list:
// kube-apiserver writes a list response as it encodes it
// (StreamingCollectionsEncodingToProtobuf), so a page of thousands of items
// is read while the server is still writing it.
//
// It accepts no more than scanProtobufList (the tests' reference) does and
// reads what it accepts the same way (FuzzScanProtobufListStream), except
// that it rejects a response without the raw field (the list message), or
// with it twice, which the serializer never writes: the first may be a
// response cut short, and the second cannot take back the items of the
// first.
func scanProtobufListStream(r io.Reader, item func(wireItem) error) (*wireList, error) {
	return scanProtobufListStreamMeta(r, nil, item)
}

// scanProtobufListStreamMeta is scanProtobufListStream that also calls
// listMeta, if not nil, once the list's ListMeta is read: the serializer
// writes it before the items, so its continue token is known while the
// server is still writing the page.
func scanProtobufListStreamMeta(r io.Reader, listMeta func(*wireList), item func(wireItem) error) (*wireList, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	prefix := make([]byte, len(protobufPrefix))
	if _, err := io.ReadFull(br, prefix); err != nil || string(prefix) != string(protobufPrefix) {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: no %q prefix", errWire, protobufPrefix)
	}
	s := &streamScanner{r: br, listMeta: listMeta}
	l := &wireList{}
	var sawRaw, encoded bool
	for {
		num, typ, end, err := s.tag(-1)
		switch {
		case err != nil:
			return nil, err
		case end:
			if encoded {
				return nil, fmt.Errorf("%w: the list has a content encoding", errWire)
			}
			if !sawRaw {
				// The serializer always writes it; a stream cut short
				// before it is not an empty list.
				return nil, fmt.Errorf("%w: no list message", errWire)
			}
			return l, nil
		}
		switch num {
		case 1: // typeMeta
			v, err := s.bytesField(typ)
			if err != nil {
				return nil, err
			}
			if err := l.readTypeMeta(v); err != nil {
				return nil, err
			}
		case 2: // raw: the list message
			if typ != wireBytes {
				return nil, errWireType
			}
			if sawRaw {
				return nil, fmt.Errorf("%w: the list message comes twice", errWire)
			}
			sawRaw = true
			n, err := s.length()
			if err != nil {
				return nil, err
			}
			if err := s.list(n, l, item); err != nil {
				return nil, err
			}
		case 3, 4: // contentEncoding, contentType
			v, err := s.bytesField(typ)
			if err != nil {
				return nil, err
			}
			if num == 3 && len(v) > 0 {
				encoded = true
			}
		default:
			if err := s.skip(typ); err != nil {
				return nil, err
			}
		}
	}
}

// streamScanner reads protobuf fields from a stream, counting what it
// consumed so that an embedded message's end is known.
type streamScanner struct {
	r    *bufio.Reader
	read int64
	buf  []byte // the last bytes field, reused
	// listMeta, if not nil, is called with the list once its ListMeta is
	// read.
	listMeta func(*wireList)
}

// list reads the list message (n bytes): its ListMeta into l, each item's
// identity to item.
func (s *streamScanner) list(n int64, l *wireList, item func(wireItem) error) error {
	end := s.read + n
	for {
		num, typ, done, err := s.tag(end)
		if err != nil || done {
			return err
		}
		switch num {
		case 1: // metadata (ListMeta)
			v, err := s.bytesField(typ)
			if err != nil {
				return err
			}
			if err := l.readListMeta(v); err != nil {
				return err
			}
			if s.listMeta != nil {
				s.listMeta(l)
			}
		case 2: // items
			v, err := s.bytesField(typ)
			if err != nil {
				return err
			}
			it, err := scanItem(v)
			if err != nil {
				return err
			}
			if err := item(it); err != nil { // it.raw is v, reused
				return err
			}
		default:
			if err := s.skip(typ); err != nil {
				return err
			}
		}
		if s.read > end {
			return fmt.Errorf("%w: bad length", errWire)
		}
	}
}

// tag reads the next field's tag. At end (the enclosing message's end
// offset; -1: the stream's end) it reports done instead.
func (s *streamScanner) tag(end int64) (num, typ int, done bool, err error) {
	if end >= 0 && s.read == end {
		return 0, 0, true, nil
	}
	v, err := s.varint()
	if err != nil {
		if end < 0 && errors.Is(err, io.EOF) {
			return 0, 0, true, nil
		}
		return 0, 0, false, fmt.Errorf("%w: bad tag", errWire)
	}
	num64 := v >> 3
	if num64 == 0 || num64 > 1<<29-1 {
		return 0, 0, false, fmt.Errorf("%w: illegal field number %d", errWire, num64)
	}
	return int(num64), int(v & 7), false, nil
}

// varint reads a varint as uvarint does: io.EOF only before its first
// byte.
func (s *streamScanner) varint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		c, err := s.r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		s.read++
		if i == 10 {
			return 0, errors.New("varint overflow")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
}

// length reads a length-delimited field's length.
func (s *streamScanner) length() (int64, error) {
	l, err := s.varint()
	if err != nil || l > 1<<62 {
		return 0, fmt.Errorf("%w: bad length", errWire)
	}
	return int64(l), nil
}

// bytesField reads a length-delimited field's payload into s.buf, which
// the next call reuses.
func (s *streamScanner) bytesField(typ int) ([]byte, error) {
	if typ != wireBytes {
		return nil, errWireType
	}
	n, err := s.length()
	if err != nil {
		return nil, err
	}
	if n > int64(cap(s.buf)) {
		if n > maxStreamField {
			return nil, fmt.Errorf("%w: a field of %d bytes", errWire, n)
		}
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, fmt.Errorf("%w: bad length", errWire)
	}
	s.read += n
	return s.buf, nil
}

// maxStreamField bounds one field read whole: an item, the ListMeta, the
// TypeMeta (an object's protobuf is limited to the apiserver's 3 MiB
// request size by etcd; this leaves room).
const maxStreamField = 64 << 20

// skip reads past a field of wire type typ that is not read.
func (s *streamScanner) skip(typ int) error {
	var n int64
	switch typ {
	case wireVarint:
		if _, err := s.varint(); err != nil {
			return fmt.Errorf("%w: bad varint", errWire)
		}
		return nil
	case wireFixed64:
		n = 8
	case wireFixed32:
		n = 4
	case wireBytes:
		var err error
		if n, err = s.length(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unsupported wire type %d", errWire, typ)
	}
	m, err := io.CopyN(io.Discard, s.r, n)
	s.read += m
	if err != nil {
		return fmt.Errorf("%w: truncated field", errWire)
	}
	return nil
}
