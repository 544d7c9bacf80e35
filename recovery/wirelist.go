package recovery

import (
	"bufio"
	"errors"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/internal/wire"
)

// A list in Kubernetes protobuf is read without decoding it. internal/wire
// reads the layout, and owns what it follows of apimachinery's. The
// reflector keeps each item's identity, and its bytes or decoded object.

// protobufPrefix is the serializer's magic number (wire.Prefix).
var protobufPrefix = []byte(wire.Prefix)

// errWire says the bytes are not a well-formed list in Kubernetes protobuf.
var errWire = wire.ErrMalformed

// wireList is a scanned list.
type wireList struct {
	apiVersion, kind string // of the list (for example "v1", "PodList")
	resourceVersion  string
	continueToken    string
	items            []wireItem
}

// newWireList is the list l read, without items.
func newWireList(l *wire.List) *wireList {
	return &wireList{apiVersion: l.APIVersion, kind: l.Kind, resourceVersion: l.ResourceVersion, continueToken: l.Continue}
}

// wireItem is one item of a list. It holds the item's identity and its
// message, raw, a slice of the list's body that decode decodes. For a body
// decoded whole, it holds the decoded object, obj, instead.
type wireItem struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	raw             []byte
	decode          func([]byte) (runtime.Object, error)
	obj             runtime.Object
}

// held reports whether the item holds its object, decoded or as its bytes.
// An item of a list read from its bytes holds them only where the reader
// kept them. Otherwise it is its identity alone.
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

// errBody says a page's body, in a format other than protobuf, could not be
// read whole or decoded. It may be cut short, so the page is asked for again.
var errBody = errors.New("the page's body does not read")

// isProtobuf reports whether body is in Kubernetes protobuf.
func isProtobuf(body []byte) bool { return wire.HasPrefix(body) }

// sniffProtobuf reports whether the body br reads is in Kubernetes
// protobuf, and consumes none of it (wire.PeekPrefix). A body cut before or
// inside the prefix, or empty, is an errWire, as a body cut later is.
func sniffProtobuf(br *bufio.Reader) (bool, error) { return wire.PeekPrefix(br) }

// protoUnmarshaler is what the generated types of Kubernetes' API groups
// implement. A list's Unmarshal decodes each item with it, into a zero
// value.
type protoUnmarshaler interface {
	runtime.Object
	Unmarshal(data []byte) error
}

// itemDecoder returns the function that decodes one item of a protobuf
// list of kind listKind into a new object of type t. t is a pointer type,
// as Options.ExpectedType is. The function decodes exactly as decoding the
// list would. itemDecoder returns nil if t is not the type of such items.
// That is so for a type that is not a generated protobuf type. It is so
// too where the list is not of t's list kind.
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
