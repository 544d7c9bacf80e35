// Reaches into k8s.io/apimachinery pkg/runtime/serializer/protobuf/collections.go at v0.37.2:
// the streaming list encoder writes the envelope of envelope.go around the
// list message, its ListMeta (field 1) before its items (field 2).
// Reaches into k8s.io/apimachinery pkg/apis/meta/v1/generated.proto at v0.37.2:
// ListMeta's and ObjectMeta's field numbers and wire types.
//
// Where a list does not read as this layout, ReadList returns ErrMalformed
// and its caller decodes the list whole, so a changed layout costs the
// skipped decodes, not correctness. FuzzReadList and the reflector's list
// tests pin the layout against the serializer in use.

package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"
)

// A list's message, the envelope's raw field:
//
//	{ ListMeta metadata = 1 { string resourceVersion = 2; string continue = 3 }
//	  repeated <Item> items = 2     each:
//	    { ObjectMeta metadata = 1 { string name = 1; string namespace = 3;
//	                                string uid = 5; string resourceVersion = 6 } } }
//
// Every list type of Kubernetes' API groups has its ListMeta as field 1 and
// its items as field 2, and every object type its ObjectMeta as field 1.
// ReadList reads what the generated Unmarshal methods would: fields in any
// order, unknown fields skipped, a repeated embedded message merged into
// the earlier ones (a scalar field's last occurrence wins), absent fields
// empty. What those methods reject, ReadList rejects too.
const (
	listMeta  protowire.Number = 1
	listItems protowire.Number = 2
	itemMeta  protowire.Number = 1
)

// List is what a list response says of itself.
type List struct {
	APIVersion, Kind string // from the envelope, for example "v1" and "PodList"
	ResourceVersion  string
	Continue         string
}

// Item is one item of a list: its identity, and its message.
type Item struct {
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Raw is the item's message, which the item type's Unmarshal decodes.
	Raw []byte
}

// ReadList reads a list in Kubernetes protobuf from r as it arrives. It
// calls meta, if not nil, whenever the list's ListMeta has been read, and
// item with each item, whose Raw is valid only until item returns. It
// returns the list; an error of item ends the read and is returned.
//
// Memory stays at one item's size however long the list: kube-apiserver
// writes a list response as it encodes it, so a page of thousands of items
// is read while the server is still writing it, and the ListMeta, written
// first, is known before the items.
//
// Beyond what the generated Unmarshal rejects, ReadList rejects a response
// without the raw field, or with it twice, which the serializer never
// writes: the first may be a response cut short, and the second cannot take
// back the items of the first. A read error is returned wrapped in
// ErrMalformed, except while reading the prefix. A stream that ends early,
// wherever it is cut, is io.ErrUnexpectedEOF within ErrMalformed, never a
// bare io.EOF: a caller reads it as a failed response, not a closed one.
func ReadList(r io.Reader, meta func(*List), item func(Item) error) (*List, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	prefix := make([]byte, len(Prefix))
	if n, err := io.ReadFull(br, prefix); err != nil || !HasPrefix(prefix) {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		if err != nil && string(prefix[:n]) == Prefix[:n] {
			return nil, fmt.Errorf("%w: the stream ends inside the %q prefix: %w", ErrMalformed, Prefix, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("%w: no %q prefix", ErrMalformed, Prefix)
	}
	s := &stream{r: br, limit: -1}
	l := &List{}
	var e envelope
	var sawRaw bool
	for {
		num, typ, done, err := s.tag()
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		switch num {
		case unknownRaw:
			if sawRaw {
				return nil, fmt.Errorf("%w: the list message comes twice", ErrMalformed)
			}
			sawRaw = true
			n, err := s.length(typ)
			if err != nil {
				return nil, err
			}
			s.limit = s.read + n
			err = s.list(l, meta, item)
			s.limit = -1
			if err != nil {
				return nil, err
			}
		case unknownTypeMeta, unknownContentEncoding, unknownContentType:
			v, err := s.bytes(typ)
			if err != nil {
				return nil, err
			}
			if err := e.field(num, typ, v); err != nil {
				return nil, err
			}
			l.APIVersion, l.Kind = e.apiVersion, e.kind
		default:
			if err := s.skip(typ); err != nil {
				return nil, err
			}
		}
	}
	if e.encoded {
		return nil, fmt.Errorf("%w: the list has a content encoding", ErrMalformed)
	}
	if !sawRaw {
		// The serializer always writes it; a stream cut short before it
		// is not an empty list.
		return nil, fmt.Errorf("%w: the stream ends before the list message: %w", ErrMalformed, io.ErrUnexpectedEOF)
	}
	return l, nil
}

// PeekPrefix reports whether the stream br reads starts with Prefix, and
// consumes none of it. A caller reads a body in protobuf or another format
// (JSON) by it. A stream that ends before Prefix's length, holding only a
// start of Prefix, is a body cut short: an empty stream too, which is never
// a whole list in any format. That is io.ErrUnexpectedEOF within
// ErrMalformed, never a bare io.EOF. Any other read error before Prefix's
// length is within ErrMalformed too, as a read error inside a list is. A
// shorter stream that differs from Prefix is in another format: false, and
// no error.
func PeekPrefix(br *bufio.Reader) (bool, error) {
	head, err := br.Peek(len(Prefix))
	switch {
	case err == nil:
		return HasPrefix(head), nil
	case !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return false, fmt.Errorf("%w: reading the %q prefix: %w", ErrMalformed, Prefix, err)
	case string(head) != Prefix[:len(head)]:
		return false, nil
	}
	return false, fmt.Errorf("%w: the stream ends after %d bytes, inside the %q prefix: %w", ErrMalformed, len(head), Prefix, io.ErrUnexpectedEOF)
}

// CheckWhole returns an error if body, a response read to its end, is
// Kubernetes protobuf cut short: inside Prefix (an empty body too), inside
// a field of the envelope, or before its raw field, which the serializer
// always writes. The generated Unmarshal takes such a body, cut where a
// field of the envelope ends, for a whole one without its object: a list
// without items or resourceVersion. A cut inside the raw field fails that
// Unmarshal, and a cut JSON body fails its decoder, so a body in another
// format is nil. The error is io.ErrUnexpectedEOF within ErrMalformed, as
// ReadList's for a stream cut short.
func CheckWhole(body []byte) error {
	if !HasPrefix(body) {
		if string(body) == Prefix[:min(len(body), len(Prefix))] {
			return fmt.Errorf("%w: the body ends after %d bytes, inside the %q prefix: %w", ErrMalformed, len(body), Prefix, io.ErrUnexpectedEOF)
		}
		return nil
	}
	b := body[len(Prefix):]
	sawRaw := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return parseError("the envelope", n)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return parseError("the envelope", n)
		}
		b = b[n:]
		sawRaw = sawRaw || num == unknownRaw
	}
	if !sawRaw {
		return fmt.Errorf("%w: the body ends before the envelope's raw field: %w", ErrMalformed, io.ErrUnexpectedEOF)
	}
	return nil
}

// list reads the list message, up to s.limit: its ListMeta into l, each
// item to item.
func (s *stream) list(l *List, meta func(*List), item func(Item) error) error {
	for {
		num, typ, done, err := s.tag()
		if err != nil || done {
			return err
		}
		switch num {
		case listMeta:
			v, err := s.bytes(typ)
			if err != nil {
				return err
			}
			if err := readListMeta(l, v); err != nil {
				return err
			}
			if meta != nil {
				meta(l)
			}
		case listItems:
			v, err := s.bytes(typ)
			if err != nil {
				return err
			}
			it, err := readItem(v)
			if err != nil {
				return err
			}
			if err := item(it); err != nil {
				return err
			}
		default:
			if err := s.skip(typ); err != nil {
				return err
			}
		}
	}
}

// readListMeta reads a ListMeta message into l.
func readListMeta(l *List, msg []byte) error {
	return eachField(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 2:
			return stringField(typ, v, &l.ResourceVersion)
		case 3:
			return stringField(typ, v, &l.Continue)
		}
		return nil
	})
}

// readItem reads the identity of the item whose message is msg.
func readItem(msg []byte) (Item, error) {
	var name, namespace, uid, rv []byte
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != itemMeta {
			return nil
		}
		if typ != protowire.BytesType {
			return errWireType
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case 1:
				return bytesField(typ, v, &name)
			case 3:
				return bytesField(typ, v, &namespace)
			case 5:
				return bytesField(typ, v, &uid)
			case 6:
				return bytesField(typ, v, &rv)
			}
			return nil
		})
	})
	if err != nil {
		return Item{}, err
	}
	// One allocation holds the four strings: an item's identity is kept or
	// dropped whole, and allocating is most of what reading it costs.
	var b strings.Builder
	b.Grow(len(name) + len(namespace) + len(uid) + len(rv))
	for _, f := range [][]byte{name, namespace, uid, rv} {
		b.Write(f)
	}
	all := b.String()
	it := Item{Raw: msg}
	it.Name, all = all[:len(name)], all[len(name):]
	it.Namespace, all = all[:len(namespace)], all[len(namespace):]
	it.UID, it.ResourceVersion = types.UID(all[:len(uid)]), all[len(uid):]
	return it, nil
}
