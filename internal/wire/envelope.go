// Reaches into k8s.io/apimachinery pkg/runtime/serializer/protobuf/protobuf.go at v0.37.2:
// the prefix the serializer writes before every object and list, and that
// a runtime.Unknown follows it whose raw is the object's own message.
// Reaches into k8s.io/apimachinery pkg/runtime/generated.proto at v0.37.2:
// runtime.Unknown's and runtime.TypeMeta's field numbers and wire types.
//
// Where an object does not read as this layout, the Decoder keeps no
// payload and reports it once (utilruntime.HandleError). The store then
// marshals the object again: slower, and counted by Stats as not found.
// A list that does not read as it is decoded whole. TestDecoderRemembersTheObjectsMessage
// and FuzzDecoder pin the layout against the serializer in use.

package wire

import "google.golang.org/protobuf/encoding/protowire"

// Prefix starts every object and list the apiserver encodes as protobuf
// (the serializer's protoEncodingPrefix); a runtime.Unknown follows:
//
//	"k8s\x00"
//	runtime.Unknown {
//	  TypeMeta typeMeta = 1 { string apiVersion = 1; string kind = 2 }
//	  bytes raw = 2                  the object's or list's message
//	  string contentEncoding = 3     empty: raw is not further encoded
//	  string contentType = 4 }
const Prefix = "k8s\x00"

// HasPrefix reports whether b starts with Prefix: whether it is Kubernetes
// protobuf.
func HasPrefix(b []byte) bool {
	return len(b) >= len(Prefix) && string(b[:len(Prefix)]) == Prefix
}

// The field numbers of runtime.Unknown.
const (
	unknownTypeMeta        protowire.Number = 1
	unknownRaw             protowire.Number = 2
	unknownContentEncoding protowire.Number = 3
	unknownContentType     protowire.Number = 4
)

// envelope is what a runtime.Unknown says besides its raw field.
type envelope struct {
	// skipTypeMeta leaves apiVersion and kind empty: a Decoder's inner
	// decoder reads them, and reading them here would cost two strings.
	skipTypeMeta     bool
	apiVersion, kind string
	// encoded: the last contentEncoding is not empty, so raw is not the
	// message itself (gzip or the like).
	encoded bool
}

// field reads field num of a runtime.Unknown, other than raw, as the
// generated Unmarshal does: a known field of another wire type is an
// error, the last occurrence wins, and unknown fields are ignored.
func (e *envelope) field(num protowire.Number, typ protowire.Type, v []byte) error {
	switch num {
	case unknownTypeMeta:
		if typ != protowire.BytesType {
			return errWireType
		}
		if e.skipTypeMeta {
			return nil
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case 1:
				return stringField(typ, v, &e.apiVersion)
			case 2:
				return stringField(typ, v, &e.kind)
			}
			return nil
		})
	case unknownContentEncoding:
		if typ != protowire.BytesType {
			return errWireType
		}
		e.encoded = len(v) > 0
	case unknownContentType:
		if typ != protowire.BytesType {
			return errWireType
		}
	}
	return nil
}

// objectMessage returns the raw field of msg, a runtime.Unknown, if it
// parses and its content is not further encoded. raw is a slice of msg.
func objectMessage(msg []byte) (raw []byte, ok bool) {
	raw, _, ok = readObject(msg, envelope{skipTypeMeta: true})
	return raw, ok
}

// readObject is objectMessage also returning the rest of the envelope, read
// into e. It loops without eachField: it runs once per watch event.
func readObject(msg []byte, e envelope) (raw []byte, _ envelope, ok bool) {
	for len(msg) > 0 {
		num, typ, v, n, err := consumeField(msg)
		if err != nil {
			return nil, e, false
		}
		msg = msg[n:]
		switch {
		case num != unknownRaw:
			if e.field(num, typ, v) != nil {
				return nil, e, false
			}
		case typ != protowire.BytesType:
			return nil, e, false
		default:
			raw = v
		}
	}
	return raw, e, !e.encoded && len(raw) > 0
}
