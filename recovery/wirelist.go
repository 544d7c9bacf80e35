// Reaches into k8s.io/apimachinery pkg/runtime/serializer/protobuf/protobuf.go at v0.37.2:
// the wire layout of a protobuf list response (the serializer's prefix, the
// runtime.Unknown envelope, ListMeta and ObjectMeta field numbers), parsed
// without decoding. What does not parse as that layout is decoded whole (a
// list read as it arrives is asked for again), so a changed layout costs
// the skipped decodes, not correctness; TestScanProtobufListOfTheSerializer
// and FuzzScanProtobufList pin it against the serializer in use.

package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// A list in Kubernetes protobuf, read without decoding it. The layout, as
// k8s.io/apimachinery v0.37.2 writes and reads it
// (runtime/serializer/protobuf/protobuf.go, runtime/generated.proto,
// apis/meta/v1/generated.proto):
//
//	"k8s\x00"                          the serializer's prefix, then
//	runtime.Unknown {
//	  TypeMeta typeMeta = 1 { string apiVersion = 1; string kind = 2 }
//	  bytes raw = 2                    the list message:
//	    { ListMeta metadata = 1 { string resourceVersion = 2; string continue = 3 }
//	      repeated <Item> items = 2    each:
//	        { ObjectMeta metadata = 1 { string name = 1; string namespace = 3;
//	                                    string uid = 5; string resourceVersion = 6 } } }
//	  string contentEncoding = 3
//	  string contentType = 4 }
//
// Every list type of Kubernetes' API groups has its ListMeta as field 1 and
// its items as field 2, and every object type its ObjectMeta as field 1.
// The scanner reads what the generated Unmarshal methods would: fields in
// any order, unknown fields skipped, a repeated embedded message merged
// into the earlier ones (so a scalar field's last occurrence wins), absent
// fields empty. What those methods reject — a known field with the wrong
// wire type, a truncated or overlong length — the scanner rejects too, and
// the caller then decodes the body whole, which reports the error as
// client-go's list would.

// protobufPrefix is the serializer's magic number.
var protobufPrefix = []byte("k8s\x00")

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// errWire: the bytes are not a well-formed message of the layout above.
var errWire = errors.New("malformed protobuf")

// wireList is a scanned list.
type wireList struct {
	apiVersion, kind string // of the list (for example "v1", "PodList")
	resourceVersion  string
	continueToken    string
	items            []wireItem
}

// wireItem is one item of a list: its identity, and its message (raw, a
// slice of the list's body, which decode decodes) or, for a body decoded
// whole, the decoded object (obj).
type wireItem struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	raw             []byte
	decode          func([]byte) (runtime.Object, error)
	obj             runtime.Object
}

// held reports whether the item holds its object: decoded, or its bytes.
// An item of a list read from its bytes holds them only where the reader
// kept them; otherwise it is its identity alone.
func (it *wireItem) held() bool { return it.obj != nil || it.raw != nil }

// object returns the item's object, decoding it if needed.
func (it *wireItem) object() (runtime.Object, error) {
	if it.obj != nil {
		return it.obj, nil
	}
	return it.decode(it.raw)
}

// key is the item's key, as cache.MetaNamespaceKeyFunc makes it.
func (it *wireItem) key() string {
	if it.namespace == "" {
		return it.name
	}
	return it.namespace + "/" + it.name
}

// isProtobuf reports whether body is in Kubernetes protobuf.
func isProtobuf(body []byte) bool { return bytes.HasPrefix(body, protobufPrefix) }

// readTypeMeta reads the list's TypeMeta message.
func (l *wireList) readTypeMeta(msg []byte) error {
	return eachField(msg, func(num, typ int, v []byte) error {
		switch num {
		case 1:
			return stringField(typ, v, &l.apiVersion)
		case 2:
			return stringField(typ, v, &l.kind)
		}
		return nil
	})
}

// readListMeta reads the list's ListMeta message.
func (l *wireList) readListMeta(msg []byte) error {
	return eachField(msg, func(num, typ int, v []byte) error {
		switch num {
		case 2:
			return stringField(typ, v, &l.resourceVersion)
		case 3:
			return stringField(typ, v, &l.continueToken)
		}
		return nil
	})
}

// scanItem reads the identity of one item.
func scanItem(msg []byte) (wireItem, error) {
	it := wireItem{raw: msg}
	var uid string
	err := eachField(msg, func(num, typ int, v []byte) error {
		if num != 1 { // metadata (ObjectMeta)
			return nil
		}
		if typ != wireBytes {
			return errWireType
		}
		return eachField(v, func(num, typ int, v []byte) error {
			switch num {
			case 1:
				return stringField(typ, v, &it.name)
			case 3:
				return stringField(typ, v, &it.namespace)
			case 5:
				return stringField(typ, v, &uid)
			case 6:
				return stringField(typ, v, &it.resourceVersion)
			}
			return nil
		})
	})
	it.uid = types.UID(uid)
	return it, err
}

// errWireType: a known field with another wire type than its declared one.
var errWireType = fmt.Errorf("%w: wrong wire type", errWire)

// stringField stores a string field's value in p.
func stringField(typ int, v []byte, p *string) error {
	if typ != wireBytes {
		return errWireType
	}
	*p = string(v)
	return nil
}

// eachField calls fn with every field of msg in order: its number, wire
// type and value (the payload of a length-delimited field; the encoded
// bytes of the others).
func eachField(msg []byte, fn func(num, typ int, v []byte) error) error {
	for len(msg) > 0 {
		tag, n := uvarint(msg)
		if n <= 0 {
			return fmt.Errorf("%w: bad tag", errWire)
		}
		msg = msg[n:]
		num, typ := tag>>3, int(tag&7)
		if num == 0 || num > 1<<29-1 {
			return fmt.Errorf("%w: illegal field number %d", errWire, num)
		}
		var v []byte
		switch typ {
		case wireVarint:
			_, n := uvarint(msg)
			if n <= 0 {
				return fmt.Errorf("%w: bad varint", errWire)
			}
			v, msg = msg[:n], msg[n:]
		case wireFixed64:
			if len(msg) < 8 {
				return fmt.Errorf("%w: truncated fixed64", errWire)
			}
			v, msg = msg[:8], msg[8:]
		case wireFixed32:
			if len(msg) < 4 {
				return fmt.Errorf("%w: truncated fixed32", errWire)
			}
			v, msg = msg[:4], msg[4:]
		case wireBytes:
			l, n := uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return fmt.Errorf("%w: bad length", errWire)
			}
			v, msg = msg[n:n+int(l)], msg[n+int(l):]
		default:
			// Groups (3, 4) are deprecated and never written by
			// Kubernetes; 6 and 7 do not exist.
			return fmt.Errorf("%w: unsupported wire type %d", errWire, typ)
		}
		if err := fn(int(num), typ, v); err != nil {
			return err
		}
	}
	return nil
}

// uvarint reads a varint as the generated code does (at most 10 bytes); n
// is 0 if b is truncated, negative if the varint is too long.
func uvarint(b []byte) (v uint64, n int) {
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// protoUnmarshaler is what the generated types of Kubernetes' API groups
// implement: a list's Unmarshal decodes each item with it, into a zero
// value.
type protoUnmarshaler interface {
	runtime.Object
	Unmarshal(data []byte) error
}

// itemDecoder returns the function that decodes one item of a protobuf
// list of kind listKind into a new object of type t (a pointer type, as
// Options.ExpectedType), exactly as decoding the list would; nil if t is
// not the type of such items (not a generated protobuf type, or the list is
// not t's list kind).
func itemDecoder(t reflect.Type, listKind string) func([]byte) (runtime.Object, error) {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct ||
		listKind != t.Elem().Name()+"List" || !t.Implements(reflect.TypeFor[protoUnmarshaler]()) {
		return nil
	}
	elem := t.Elem()
	return func(b []byte) (runtime.Object, error) {
		obj := reflect.New(elem).Interface().(protoUnmarshaler)
		if err := obj.Unmarshal(b); err != nil {
			return nil, err
		}
		return obj, nil
	}
}
