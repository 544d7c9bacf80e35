package persist

import (
	"encoding/json"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/boltinformer/boltinformer/internal/format"
)

// protoMessage is the subset of the gogo-generated methods every type in
// k8s.io/api carries. Using them directly skips runtime.Unknown wrapping and
// scheme conversion, which is what makes protobuf the fastest lossless codec
// we measured (codec_bench_test.go; results in docs/operations.md, "Storage").
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// Codec turns objects into records and back, losslessly. Typed objects are
// encoded with their generated protobuf methods when they have them, and
// with JSON otherwise. The content of an *unstructured.Unstructured is
// encoded as msgpack. Unlike JSON, msgpack keeps int64 and float64 apart
// (2.0 stays a float64), and it decodes faster. The TypeMeta of the object
// is kept exactly as it was.
//
// A Codec is safe for concurrent use.
type Codec struct {
	scheme *runtime.Scheme
	// kinds caches the scheme's GroupVersionKind string per Go type.
	kinds sync.Map // reflect.Type -> string
	// types caches the scheme GroupVersionKind per type string in records.
	types sync.Map // string -> schema.GroupVersionKind
	// largestProto is the largest protobuf payload encoded so far, which
	// sizes encodeProto's scratch buffers.
	largestProto atomic.Int64
}

// NewCodec returns a Codec that resolves typed objects through scheme. A nil
// scheme allows only unstructured objects and the metadata-only types every
// codec knows (see metaTypes).
func NewCodec(scheme *runtime.Scheme) *Codec {
	return &Codec{scheme: scheme}
}

// metaTypes are the types every Codec can encode and decode, whether or not
// its scheme registers them. They are meta.k8s.io/v1 PartialObjectMetadata
// and its list, which metadata-only informers store. client-go's
// scheme.Scheme, which most programs pass to Open, does not register them.
// A metadata informer on such a file would otherwise find at its first
// write that it cannot persist anything. The caller's scheme is asked
// first. So a scheme that registers them names them as before, and
// controller-runtime's adapter does (see its CodecScheme). Both name them
// "meta.k8s.io/v1, Kind=PartialObjectMetadata".
var metaTypes = func() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(metav1.SchemeGroupVersion, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{})
	return s
}()

// Encode returns the record for obj. The record does not alias obj.
func (c *Codec) Encode(obj runtime.Object) ([]byte, error) { return c.encode(obj, nil, nil) }

// encode is Encode writing the record over buf if it has the capacity. A
// protobuf-encoded object's payload is wire if given (see Op.Payload).
func (c *Codec) encode(obj runtime.Object, wire, buf []byte) ([]byte, error) {
	if obj == nil {
		return nil, fmt.Errorf("%w: nil object", ErrUnencodable)
	}
	accessor, ok := obj.(metav1.ObjectMetaAccessor)
	var rv string
	if ok {
		rv = accessor.GetObjectMeta().GetResourceVersion()
	} else if u, isU := obj.(*unstructured.Unstructured); isU {
		rv = u.GetResourceVersion()
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	if tm, isTM := obj.GetObjectKind().(*metav1.TypeMeta); isTM {
		apiVersion, kind = tm.APIVersion, tm.Kind
	}
	h := format.Header{ResourceVersion: rv, APIVersion: apiVersion, Kind: kind}

	if u, isU := obj.(*unstructured.Unstructured); isU {
		h.Encoding = format.EncodingUnstructured
		data, err := encodeContent(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%w: %T: %v", ErrUnencodable, obj, err)
		}
		return format.AppendRecordTo(buf, h, len(data), func(p []byte) error { copy(p, data); return nil })
	}

	typ, err := c.typeOf(obj)
	if err != nil {
		return nil, err
	}
	h.Type = typ
	if pm, isPM := obj.(protoMessage); isPM {
		h.Encoding = format.EncodingProtobuf
		if wire != nil {
			return format.AppendRecordTo(buf, h, len(wire), func(p []byte) error { copy(p, wire); return nil })
		}
		rec, err := c.encodeProto(buf, h, pm)
		if err != nil {
			return nil, fmt.Errorf("%w: %T: %v", ErrUnencodable, obj, err)
		}
		return rec, nil
	}
	h.Encoding = format.EncodingJSON
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %T: %v", ErrUnencodable, obj, err)
	}
	return format.AppendRecordTo(buf, h, len(data), func(p []byte) error { copy(p, data); return nil })
}

// encodeProto returns the record of a protobuf-encoded object with header h,
// over buf if it has the capacity.
//
// The generated MarshalToSizedBuffer writes backwards from the end of the
// buffer it is given, and returns the bytes written. It needs no exact size,
// only enough room. Size walks the whole object as the marshalling does. For
// a Pod, that is about half of what Size plus marshalling cost. So
// marshalling into a scratch buffer with room to spare, and copying the tail
// out, costs one pass instead of two. Room is at least minProtoScratch and
// twice the largest payload seen. An object that does not fit makes the
// generated code index out of range, which marshalTail reports. The object
// is then encoded the exact way, with Size.
func (c *Codec) encodeProto(buf []byte, h format.Header, pm protoMessage) ([]byte, error) {
	want := max(minProtoScratch, 2*int(c.largestProto.Load()))
	sp := protoScratch.Get().(*[]byte)
	defer protoScratch.Put(sp)
	if len(*sp) < want {
		*sp = make([]byte, want)
	}
	scratch := *sp
	if n, ok, err := marshalTail(pm, scratch); err != nil {
		return nil, err
	} else if ok {
		c.noteProtoSize(n)
		return format.AppendRecordTo(buf, h, n, func(p []byte) error { copy(p, scratch[len(scratch)-n:]); return nil })
	}
	n := pm.Size()
	c.noteProtoSize(n)
	return format.AppendRecordTo(buf, h, n, func(p []byte) error {
		written, err := pm.MarshalToSizedBuffer(p)
		if err == nil && written != n {
			err = fmt.Errorf("protobuf wrote %d bytes, Size said %d", written, n)
		}
		return err
	})
}

// minProtoScratch is the smallest scratch buffer of encodeProto. Most
// objects are far smaller, and a Pod is 2–6 KB.
const minProtoScratch = 64 << 10

// protoScratch holds encodeProto's scratch buffers (*[]byte).
var protoScratch = sync.Pool{New: func() any { return new([]byte) }}

// noteProtoSize raises the largest protobuf payload seen to n.
func (c *Codec) noteProtoSize(n int) {
	for old := c.largestProto.Load(); int64(n) > old && !c.largestProto.CompareAndSwap(old, int64(n)); old = c.largestProto.Load() {
	}
}

// marshalTail marshals pm into the end of buf and returns the length
// written. It returns ok false if pm does not fit. Generated protobuf code
// does not check bounds, so it indexes out of range. That runtime error is
// what is recovered here. Any other panic propagates.
func marshalTail(pm protoMessage, buf []byte) (n int, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			if re, isRE := r.(goruntime.Error); isRE && strings.Contains(re.Error(), "out of range") {
				n, ok, err = 0, false, nil
				return
			}
			panic(r)
		}
	}()
	n, err = pm.MarshalToSizedBuffer(buf)
	return n, err == nil, err
}

// typeOf returns the scheme kind string of obj's Go type.
func (c *Codec) typeOf(obj runtime.Object) (string, error) {
	t := reflect.TypeOf(obj)
	if s, ok := c.kinds.Load(t); ok {
		return s.(string), nil
	}
	var gvks []schema.GroupVersionKind
	var err error
	if c.scheme != nil {
		gvks, _, err = c.scheme.ObjectKinds(obj)
	}
	if c.scheme == nil || err != nil || len(gvks) == 0 {
		known, _, metaErr := metaTypes.ObjectKinds(obj)
		switch {
		case metaErr == nil && len(known) > 0:
			gvks = known
		case c.scheme == nil:
			return "", fmt.Errorf("%w: %T: no scheme to name its type", ErrUnencodable, obj)
		default:
			return "", fmt.Errorf("%w: %T is not registered in the scheme (register it, or use *unstructured.Unstructured): %v", ErrUnencodable, obj, err)
		}
	}
	s := gvks[0].String()
	c.kinds.Store(t, s)
	c.types.Store(s, gvks[0])
	return s, nil
}

// Decode returns a new object decoded from record. The object does not alias
// record, so record may be memory owned by a bbolt transaction.
func (c *Codec) Decode(record []byte) (runtime.Object, error) {
	h, payload, err := format.ReadHeader(record)
	if err != nil {
		return nil, err
	}
	return c.decodePayload(h, payload)
}

// decodePayload decodes the payload of a record whose header is h.
func (c *Codec) decodePayload(h format.Header, payload []byte) (runtime.Object, error) {
	if h.Encoding == format.EncodingUnstructured {
		content, err := decodeContent(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: unstructured payload: %v", ErrCorruptRecord, err)
		}
		return &unstructured.Unstructured{Object: content}, nil
	}
	obj, err := c.newObject(h.Type)
	if err != nil {
		return nil, err
	}
	switch h.Encoding {
	case format.EncodingProtobuf:
		pm, ok := obj.(protoMessage)
		if !ok {
			return nil, fmt.Errorf("%w: %s was stored as protobuf but %T has no protobuf methods", ErrCorruptRecord, h.Type, obj)
		}
		if err := pm.Unmarshal(payload); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, h.Type, err)
		}
	case format.EncodingJSON:
		if err := json.Unmarshal(payload, obj); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, h.Type, err)
		}
	default:
		return nil, fmt.Errorf("%w: unknown payload encoding %d", ErrCorruptRecord, h.Encoding)
	}
	if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
		tm.APIVersion, tm.Kind = h.APIVersion, h.Kind
	} else {
		obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(h.APIVersion, h.Kind))
	}
	return obj, nil
}

func (c *Codec) newObject(typ string) (runtime.Object, error) {
	var gvk schema.GroupVersionKind
	if v, ok := c.types.Load(typ); ok {
		gvk = v.(schema.GroupVersionKind)
	} else {
		parsed, err := parseGVKString(typ)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrCorruptRecord, typ, err)
		}
		gvk = parsed
		c.types.Store(typ, gvk)
	}
	if c.scheme != nil {
		obj, err := c.scheme.New(gvk)
		if err == nil {
			return obj, nil
		}
		if obj, metaErr := metaTypes.New(gvk); metaErr == nil {
			return obj, nil
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrUnknownType, typ, err)
	}
	if obj, err := metaTypes.New(gvk); err == nil {
		return obj, nil
	}
	return nil, fmt.Errorf("%w: record of type %q needs a scheme", ErrUnknownType, typ)
}

// parseGVKString inverts schema.GroupVersionKind.String: "group/version, Kind=K"
// (group empty for the core group: "/v1, Kind=Pod").
func parseGVKString(s string) (schema.GroupVersionKind, error) {
	var gv, kind string
	for i := 0; i+7 <= len(s); i++ {
		if s[i:i+7] == ", Kind=" {
			gv, kind = s[:i], s[i+7:]
			break
		}
	}
	if kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("not a GroupVersionKind")
	}
	for i := len(gv) - 1; i >= 0; i-- {
		if gv[i] == '/' {
			return schema.GroupVersionKind{Group: gv[:i], Version: gv[i+1:], Kind: kind}, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("not a GroupVersionKind")
}

// placeholder returns, for a record whose payload cannot be decoded, an
// empty object of the type its header names. The object carries only key's
// namespace and name and the header's resourceVersion. A consumer is told
// of a deleted object with an unreadable last state this way. It returns
// nil if not even the header can be read.
func (c *Codec) placeholder(key string, record []byte) runtime.Object {
	h, _, err := format.ReadHeader(record)
	if err != nil {
		return nil
	}
	ns, name := "", key
	if i := strings.IndexByte(key, '/'); i >= 0 {
		ns, name = key[:i], key[i+1:]
	}
	if h.Encoding == format.EncodingUnstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetAPIVersion(h.APIVersion)
		u.SetKind(h.Kind)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetResourceVersion(h.ResourceVersion)
		return u
	}
	obj, err := c.newObject(h.Type)
	if err != nil {
		return nil
	}
	accessor, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil
	}
	m := accessor.GetObjectMeta()
	m.SetNamespace(ns)
	m.SetName(name)
	m.SetResourceVersion(h.ResourceVersion)
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(h.APIVersion, h.Kind))
	return obj
}
