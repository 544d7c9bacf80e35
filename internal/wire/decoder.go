// Reaches into k8s.io/apimachinery pkg/runtime/serializer/protobuf/protobuf.go at v0.37.2:
// what Serializer.Decode and unmarshalToObject do with a runtime.Unknown
// and no defaults or target, which decodeInPlace repeats.
// Reaches into k8s.io/apimachinery pkg/runtime/helper.go at v0.37.2:
// WithoutVersionDecoder clears the kind of what it decodes.
//
// Where a message does not decode in place, the serializer decodes it, as
// without a Creater. TestDecoderDecodesAsTheSerializer and its fuzz target
// hold both ways to the same object, kind and error.

package wire

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Decoder decodes as its inner decoder does and remembers, for each object
// decoded from protobuf that is not a list, the object's message.
type Decoder struct {
	runtime.Decoder
	// creater, if set, is the scheme of the inner decoder, a protobuf
	// serializer under a runtime.WithoutVersionDecoder (see decodeInPlace).
	creater runtime.ObjectCreater
}

// Decode implements runtime.Decoder.
//
// The payload is a slice of data, not a copy. client-go's watch decoder
// hands each event's object in a buffer of its own: restclientwatch.Decoder
// unmarshals a new metav1.WatchEvent per event, which
// TestPayloadsOutliveTheNextEvent checks.
func (d Decoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if d.creater != nil && defaults == nil && into == nil && HasPrefix(data) {
		if obj, gvk, ok := d.decodeInPlace(data[len(Prefix):]); ok {
			return obj, gvk, nil
		}
	}
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err != nil || obj == nil || !HasPrefix(data) {
		return obj, gvk, err
	}
	if _, isList := obj.(metav1.ListInterface); isList {
		return obj, gvk, err
	}
	if raw, ok := objectMessage(data[len(Prefix):]); ok {
		remember(obj, raw)
	} else {
		unreadEnvelope.Do(func() {
			utilruntime.HandleError(fmt.Errorf("%w: a %T decoded from protobuf has an envelope internal/wire cannot read; its objects are marshalled again for the store", ErrMalformed, obj))
		})
	}
	return obj, gvk, err
}

// decodeInPlace decodes msg, a runtime.Unknown, as the protobuf serializer
// under a runtime.WithoutVersionDecoder does (protobuf.go's Decode and
// unmarshalToObject), but unmarshals the object from its message where it
// lies in msg. The serializer first copies the message out of the envelope
// (runtime.Unknown's Unmarshal), as many bytes as the object's message for
// every watch event. Generated Unmarshal methods copy every string and
// bytes field, so the object does not alias msg.
//
// It reports false for what it does not decode as plainly. That is an
// envelope objectMessage rejects, no kind or version, or a kind the scheme
// lacks. So is an object without Unmarshal, or one that fails to unmarshal.
// The caller then decodes through the serializer, which returns its own
// error.
// TestDecoderDecodesAsTheSerializer and its fuzz target hold both ways to
// the same object, kind and error.
func (d Decoder) decodeInPlace(msg []byte) (runtime.Object, *schema.GroupVersionKind, bool) {
	raw, e, ok := readObject(msg, envelope{})
	if !ok {
		return nil, nil, false
	}
	actual := schema.FromAPIVersionAndKind(e.apiVersion, e.kind)
	if actual.Kind == "" || actual.Version == "" {
		return nil, nil, false
	}
	obj, err := d.creater.New(actual)
	if err != nil {
		return nil, nil, false
	}
	u, ok := obj.(interface {
		Reset()
		Unmarshal([]byte) error
	})
	if !ok {
		return nil, nil, false
	}
	u.Reset()
	if err := u.Unmarshal(raw); err != nil {
		return nil, nil, false
	}
	// The serializer sets the kind, and the WithoutVersionDecoder clears it.
	obj.GetObjectKind().SetGroupVersionKind(actual)
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if _, isList := obj.(metav1.ListInterface); !isList {
		remember(obj, raw)
	}
	return obj, &actual, true
}

// unreadEnvelope reports, once per process, an object the serializer
// decoded whose envelope objectMessage rejects: the layout it pins changed.
var unreadEnvelope sync.Once

// NegotiatedSerializer wraps a client's serializer so that the decoders it
// makes for responses are Decoders.
type NegotiatedSerializer struct {
	runtime.NegotiatedSerializer
	// Creater, if set, must be the scheme the serializers were built with.
	Creater runtime.ObjectCreater
}

// DecoderToVersion implements runtime.NegotiatedSerializer. With a Creater,
// a Decoder of a protobuf serializer that the wrapped serializer makes a
// runtime.WithoutVersionDecoder of (as client-go's WithoutConversion codecs
// do) decodes objects in place (see Decoder.decodeInPlace).
func (s NegotiatedSerializer) DecoderToVersion(decoder runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	inner := s.NegotiatedSerializer.DecoderToVersion(decoder, gv)
	d := Decoder{Decoder: inner}
	if _, isProto := decoder.(*protobuf.Serializer); isProto && s.Creater != nil {
		if w, ok := inner.(runtime.WithoutVersionDecoder); ok && w.Decoder == decoder {
			d.creater = s.Creater
		}
	}
	return d
}
