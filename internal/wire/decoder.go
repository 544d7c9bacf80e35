package wire

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Decoder decodes as its inner decoder does and remembers, for each object
// decoded from protobuf that is not a list, the object's message.
type Decoder struct{ runtime.Decoder }

// Decode implements runtime.Decoder.
//
// The payload is a slice of data, not a copy. client-go's watch decoder
// hands each event's object in a buffer of its own: restclientwatch.Decoder
// unmarshals a new metav1.WatchEvent per event, which
// TestPayloadsOutliveTheNextEvent checks.
func (d Decoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
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

// unreadEnvelope reports, once per process, an object the serializer
// decoded whose envelope objectMessage rejects: the layout it pins changed.
var unreadEnvelope sync.Once

// NegotiatedSerializer wraps a client's serializer so that the decoders it
// makes for responses are Decoders.
type NegotiatedSerializer struct{ runtime.NegotiatedSerializer }

// DecoderToVersion implements runtime.NegotiatedSerializer.
func (s NegotiatedSerializer) DecoderToVersion(decoder runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return Decoder{s.NegotiatedSerializer.DecoderToVersion(decoder, gv)}
}
