package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// metadataList is a PartialObjectMetadataList, as a recovery's metadata
// list, of podList's items.
func metadataList() *metav1.PartialObjectMetadataList {
	pods := podList()
	l := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadataList"},
		ListMeta: pods.ListMeta,
	}
	for _, p := range pods.Items {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
	}
	return l
}

// encodeBoth returns obj, whose TypeMeta is set, as the serializer writes
// it, whole and streaming (collections.go), by the name of each way.
func encodeBoth(t testing.TB, obj runtime.Object) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, streaming := range map[string]bool{"whole": false, "streaming": true} {
		ser := protobuf.NewSerializerWithOptions(nil, nil, protobuf.SerializerOptions{StreamingCollectionsEncoding: streaming})
		var buf bytes.Buffer
		if err := ser.Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		out[name] = buf.Bytes()
	}
	return out
}

// A body cut short at any byte, a PodList's or a metadata list's, whole or
// streaming, is io.ErrUnexpectedEOF within ErrMalformed, which the caller
// reads as a failed page: never a bare io.EOF (a reflector's error handler
// takes that for a watch closed normally, and logs nothing), and never a
// shorter list. Only a cut after the list message reads as the whole body,
// losing its empty trailing fields.
func TestReadListCutAnywhere(t *testing.T) {
	pods := podList()
	pods.APIVersion, pods.Kind = "v1", "PodList"
	pods.Items[2].Annotations = map[string]string{"a": string(make([]byte, 300))} // a length of two bytes
	for kind, obj := range map[string]runtime.Object{"PodList": pods, "PartialObjectMetadataList": metadataList()} {
		for how, body := range encodeBoth(t, obj) {
			t.Run(kind+" "+how, func(t *testing.T) {
				whole, items, metas, err := readAll(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if len(items) != 3 || whole.Kind != kind {
					t.Fatalf("read %s with %d items", whole.Kind, len(items))
				}
				for n := range len(body) {
					checkCut(t, body, n, []any{whole, items, metas})
				}
			})
		}
	}
}

// checkCut reads body cut at n: it must fail as truncated, or read as
// want (the whole body's list, items and ListMetas).
func checkCut(t *testing.T, body []byte, n int, want []any) {
	t.Helper()
	l, items, metas, err := readAll(bytes.NewReader(body[:n]))
	switch {
	case err == nil:
		if got := []any{l, items, metas}; !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d of %d bytes: read %+v, no error", n, len(body), got)
		}
	case errors.Is(err, io.EOF):
		t.Fatalf("cut at %d of %d bytes: a bare io.EOF: %v", n, len(body), err)
	case !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrMalformed):
		t.Fatalf("cut at %d of %d bytes: %v, want io.ErrUnexpectedEOF within ErrMalformed", n, len(body), err)
	}
}

// FuzzReadListCut cuts valid bodies at the offset the fuzzer picks; its
// seed corpus is every cut of a small list of each kind.
func FuzzReadListCut(f *testing.F) {
	small := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "c"}, Items: []corev1.Pod{*pod("a"), *pod("b")}}
	small.APIVersion, small.Kind = "v1", "PodList"
	small.Items[1].UID = types.UID("ub")
	meta := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}, ListMeta: small.ListMeta}
	for _, p := range small.Items {
		meta.Items = append(meta.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
	}
	var bodies [][]byte
	for _, obj := range []runtime.Object{small, meta} {
		for _, how := range []string{"whole", "streaming"} {
			bodies = append(bodies, encodeBoth(f, obj)[how])
		}
	}
	for i, b := range bodies {
		for n := range len(b) {
			f.Add(uint8(i), uint32(n))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, cut uint32) {
		body := bodies[int(which)%len(bodies)]
		n := int(cut % uint32(len(body)))
		whole, items, metas, err := readAll(bytes.NewReader(body))
		if err != nil {
			t.Fatal(fmt.Errorf("the whole body: %w", err))
		}
		checkCut(t, body, n, []any{whole, items, metas})
	})
}

// A body's start tells its format (PeekPrefix) wherever it is cut, and
// however its reader reports the end: a clean io.EOF, or
// io.ErrUnexpectedEOF as net/http does for a body short of its length. A
// protobuf body cut before or inside its prefix, and an empty body, are
// cut short: never another format, never a bare io.EOF. A read error
// before the prefix is whole is a failed read. A JSON body's first byte
// tells it.
func TestPeekPrefixCutAnywhere(t *testing.T) {
	errReset := errors.New("connection reset by peer")
	bodies := encodeBoth(t, metadataList())
	bodies["json"] = []byte(`{"kind":"PartialObjectMetadataList"}`)
	for name, body := range bodies {
		for _, end := range []error{io.EOF, io.ErrUnexpectedEOF, errReset} {
			for n := range min(len(body), 2*len(Prefix)) + 1 {
				r := io.MultiReader(iotest.OneByteReader(bytes.NewReader(body[:n])), iotest.ErrReader(end))
				br := bufio.NewReader(r)
				proto, err := PeekPrefix(br)
				what := fmt.Sprintf("%s cut at %d, then %v", name, n, end)
				switch {
				case n >= len(Prefix):
					if err != nil || proto != (name != "json") {
						t.Errorf("%s: %v, %v; want %v, no error", what, proto, err, name != "json")
					}
				case end == errReset:
					if !errors.Is(err, ErrMalformed) || !errors.Is(err, errReset) {
						t.Errorf("%s: %v, want the read error within ErrMalformed", what, err)
					}
				case name == "json" && n > 0:
					if err != nil || proto {
						t.Errorf("%s: %v, %v; want another format, no error", what, proto, err)
					}
				case errors.Is(err, io.EOF) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrMalformed):
					t.Errorf("%s: %v, want io.ErrUnexpectedEOF within ErrMalformed", what, err)
				}
				if err == nil {
					// Nothing consumed: the whole body still reads.
					if got, _ := io.ReadAll(br); !bytes.Equal(got, body[:n]) {
						t.Errorf("%s: read %q after peeking, want %q", what, got, body[:n])
					}
				}
			}
		}
	}
}

// A body read to its end and cut at any byte, a PodList's, whole or
// streaming, is refused by CheckWhole, or decodes as the
// whole body does: a decoder given what CheckWhole lets through never
// reads a shorter list. The whole body passes, and so does JSON, whose
// decoder fails on a cut; an empty body is cut short.
func TestCheckWholeCutAnywhere(t *testing.T) {
	pods := podList()
	pods.APIVersion, pods.Kind = "v1", "PodList"
	decode := scheme.Codecs.UniversalDeserializer()
	for how, body := range encodeBoth(t, pods) {
		t.Run(how, func(t *testing.T) {
			if err := CheckWhole(body); err != nil {
				t.Fatalf("the whole body: %v", err)
			}
			whole, err := runtime.Decode(decode, body)
			if err != nil {
				t.Fatal(err)
			}
			for n := range len(body) {
				err := CheckWhole(body[:n])
				if err != nil {
					if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrMalformed) {
						t.Fatalf("cut at %d of %d bytes: %v, want io.ErrUnexpectedEOF within ErrMalformed", n, len(body), err)
					}
					continue
				}
				got, err := runtime.Decode(decode, body[:n])
				if err == nil && !reflect.DeepEqual(got, whole) {
					t.Fatalf("cut at %d of %d bytes: CheckWhole lets it through, and it decodes as %+v", n, len(body), got)
				}
			}
		})
	}
	if err := CheckWhole([]byte(`{"kind":"PodList"}`)); err != nil {
		t.Errorf("a JSON body: %v", err)
	}
	if err := CheckWhole(nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an empty body: %v, want io.ErrUnexpectedEOF", err)
	}
}
