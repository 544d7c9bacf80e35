package simulation

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/boltinformer/boltinformer/internal/wire"
	"github.com/boltinformer/boltinformer/recovery"
)

// The typed path as users run it. In the seeds that choose it, the server
// sends bytes where a real one does, in Kubernetes protobuf made by
// apimachinery's serializer with client-go's scheme:
//   - every watch is a length-delimited stream of WatchEvents, read by
//     client-go's own stream watcher and decoders, the object decoder
//     wrapped as the factories wrap it (wire.Decoder), so the store keeps
//     the server's bytes of each object;
//   - the recovery's metadata lists (recovery.Lister.ListMetadataWire) and
//     its lists of the collection (recovery.Lister.ListObjectsWire) hand
//     over response bodies, read as they arrive by internal/wire.
//
// With Cut, some bodies end early, as a dropped connection ends them: a
// watch stream in the middle of an event (client-go's stream watcher then
// closes the watch without an error), a list body in the middle of an item
// (the reader gets io.ErrUnexpectedEOF, or a bare io.EOF where a body's
// framing cannot tell).

var (
	// objectEncoder encodes an object as kube-apiserver does: the protobuf
	// prefix and a runtime.Unknown envelope around its message.
	objectEncoder = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// listEncoder encodes a list one item at a time, as kube-apiserver
	// 1.33 does (StreamingCollectionEncodingToProtobuf); the bytes are the
	// same.
	listEncoder = protobuf.NewSerializerWithOptions(scheme.Scheme, scheme.Scheme, protobuf.SerializerOptions{StreamingCollectionsEncoding: true})
	// eventEncoder encodes the WatchEvent around each object, raw.
	eventEncoder = protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	// watchNegotiator is a typed client's (rest.CodecFactoryForGeneratedClient)
	// whose decoders keep each object's message, as the factories make it.
	watchNegotiator = runtime.NewClientNegotiator(
		wire.NegotiatedSerializer{NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), Creater: scheme.Scheme},
		corev1.SchemeGroupVersion)
)

// WireListerWatcher is a ListerWatcher whose recovery lists hand over
// protobuf bodies: its recoveryLister has both wire forms.
type WireListerWatcher struct{ *ListerWatcher }

// recoveryLister is the ListerWatcher's recovery.Lister with both wire
// forms.
func (l *WireListerWatcher) recoveryLister() *recovery.Lister {
	lr := l.ListerWatcher.recoveryLister()
	lr.ListMetadataWire, lr.ListObjectsWire = l.ListMetadataWire, l.ListObjectsWire
	return lr
}

// ListMetadataWire is recovery.Lister.ListMetadataWire.
func (l *WireListerWatcher) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	s := l.s
	if err := s.fire(ctx, KindMeta, opts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	list, err := s.listMetadataLocked(opts)
	cut := s.cutLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return encodeBody(listEncoder, list, cut)
}

// ListObjectsWire is recovery.Lister.ListObjectsWire.
func (l *WireListerWatcher) ListObjectsWire(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	s := l.s
	if err := s.fire(ctx, KindFetch, opts); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	list, err := s.listObjectsLocked(namespace, "", opts)
	cut := s.cutLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	list.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}
	body, err := encodeBody(listEncoder, list, cut)
	if err != nil {
		return nil, nil, err
	}
	return body, func(b []byte) (runtime.Object, error) {
		return runtime.Decode(scheme.Codecs.UniversalDeserializer(), b)
	}, nil
}

// bodyCut says where a body ends early: after at (a share of its bytes,
// or with field, of its fields' boundaries), with err; nil: it is whole.
type bodyCut struct {
	at    float64
	field bool
	err   error
}

// cutLocked decides whether the next body is cut, and where. With
// fieldCuts, half the cuts come at a field's boundary: kube-apiserver
// streams a list an item at a time, so a connection that drops between two
// writes ends the body exactly between two items.
func (s *Server) cutLocked() *bodyCut {
	if !s.cut || s.rng.Intn(4) != 0 {
		return nil
	}
	s.counts["cut"]++
	err := io.ErrUnexpectedEOF
	if s.rng.Intn(2) == 0 {
		err = io.EOF
	}
	c := &bodyCut{at: s.rng.Float64(), err: err}
	if s.fieldCuts && s.rng.Intn(2) == 0 {
		c.field = true
		s.counts["cut-field"]++
	}
	return c
}

// encodeBody encodes obj as a response body, cut as cut says.
func encodeBody(enc runtime.Encoder, obj runtime.Object, cut *bodyCut) (io.ReadCloser, error) {
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	b := buf.Bytes()
	if cut == nil {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	n := min(int(cut.at*float64(len(b))), len(b)-1)
	if cut.field {
		if at := fieldBoundaries(b); len(at) > 0 {
			n = at[min(int(cut.at*float64(len(at))), len(at)-1)]
		}
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:n]), errReader{cut.err})), nil
}

// fieldBoundaries returns the offsets in a protobuf body (the prefix and a
// runtime.Unknown around a list) at which a field of the envelope, of the
// list, of an item or of an item's metadata begins, and the list's end.
func fieldBoundaries(body []byte) []int {
	prefix := len(wire.Prefix)
	if len(body) < prefix {
		return nil
	}
	var out []int
	// Which fields hold the messages whose fields are boundaries too: the
	// envelope's raw bytes (2) are the list, a list's items are field 2,
	// an item's metadata field 1.
	inner := func(path []protowire.Number) bool {
		switch len(path) {
		case 1:
			return path[0] == 2
		case 2:
			return path[1] == 2 || path[1] == 1
		case 3:
			return path[1] == 2 && path[2] == 1
		}
		return false
	}
	var walk func(msg []byte, off int, path []protowire.Number)
	walk = func(msg []byte, off int, path []protowire.Number) {
		for pos := 0; pos < len(msg); {
			out = append(out, off+pos)
			num, typ, n := protowire.ConsumeTag(msg[pos:])
			if n < 0 {
				return
			}
			m := protowire.ConsumeFieldValue(num, typ, msg[pos+n:])
			if m < 0 {
				return
			}
			if typ == protowire.BytesType {
				v, k := protowire.ConsumeBytes(msg[pos+n:])
				if k >= 0 && inner(append(path, num)) {
					walk(v, off+pos+n+(k-len(v)), append(path, num))
					out = append(out, off+pos+n+k) // the message's end
				}
			}
			pos += n + m
		}
	}
	walk(body[prefix:], prefix, nil)
	return out
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// wireWatch is a watch served as a protobuf stream: a pump goroutine
// encodes what the simulated watch delivers into a pipe, and client-go's
// stream watcher decodes it on the other end.
type wireWatch struct {
	watch.Interface // client-go's stream watcher
	w               *simWatch
	pumped          chan struct{} // closed once the pump has exited
}

// wireWatchLocked serves w as a protobuf stream, and starts it. Called
// with s.mu held.
func (s *Server) wireWatchLocked(w *simWatch) watch.Interface {
	cutAfter := -1 // events sent whole before the stream is cut in one
	if s.cut && s.rng.Intn(4) == 0 {
		cutAfter = s.rng.Intn(4)
	}
	pr, pw := io.Pipe()
	objectDecoder, streamingSerializer, framer, err := watchNegotiator.StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		panic(err) // the scheme serves protobuf: a broken build
	}
	ww := &wireWatch{w: w, pumped: make(chan struct{})}
	ww.Interface = watch.NewStreamWatcher(
		restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(pr), streamingSerializer), objectDecoder),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding"),
	)
	w.pumped = ww.pumped
	go w.run()
	go ww.pump(pw, cutAfter, &s.mu, s.counts)
	return ww
}

// Stop stops the stream watcher and the simulated watch behind it.
func (ww *wireWatch) Stop() {
	ww.Interface.Stop()
	ww.w.Stop()
}

// pump encodes each event of the simulated watch as a frame until the
// watch ends (the stream then ends cleanly), the reader goes away, or the
// stream is cut in the middle of event cutAfter+1.
func (ww *wireWatch) pump(pw *io.PipeWriter, cutAfter int, mu *sync.Mutex, counts map[string]int) {
	defer close(ww.pumped)
	defer func() {
		ww.w.Stop()
		for range ww.w.ResultChan() { // until run has exited
		}
	}()
	defer pw.Close()
	sent := 0
	for e := range ww.w.ResultChan() {
		if p, ok := e.Object.(*corev1.Pod); ok {
			p = p.DeepCopy()
			p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			e.Object = p
		} else if st, ok := e.Object.(*metav1.Status); ok {
			st = st.DeepCopy()
			st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			e.Object = st
		}
		var obj bytes.Buffer
		if err := objectEncoder.Encode(e.Object, &obj); err != nil {
			return
		}
		var frame bytes.Buffer
		if err := eventEncoder.Encode(&metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: obj.Bytes()}}, protobuf.LengthDelimitedFramer.NewFrameWriter(&frame)); err != nil {
			return
		}
		if sent == cutAfter {
			mu.Lock()
			counts["cut-watch"]++
			mu.Unlock()
			_, _ = pw.Write(frame.Bytes()[:frame.Len()/2])
			return
		}
		if _, err := pw.Write(frame.Bytes()); err != nil {
			return
		}
		sent++
	}
}
