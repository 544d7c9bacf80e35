package recovery

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// streamScan scans body as a stream, collecting the items.
func streamScan(r io.Reader) (*wireList, error) {
	var items []wireItem
	l, err := scanProtobufListStream(r, func(it wireItem) error {
		items = append(items, it)
		return nil
	})
	if l != nil {
		l.items = items
	}
	return l, err
}

// identities is what a scanned list says, without the items' raw bytes.
func identities(l *wireList) wireList {
	out := *l
	out.items = nil
	for _, it := range l.items {
		it.raw, it.decode = nil, nil
		out.items = append(out.items, it)
	}
	return out
}

// A list the serializer wrote reads the same a byte at a time as at once.
// The lists are a metadata list as kube-apiserver sends a recovery, and a
// PodList.
func TestScanProtobufListStreamOfTheSerializer(t *testing.T) {
	pods := []*v1.Pod{richPod("ns", "a", "ua", "7"), richPod("", "cluster-scoped", "uc", "8"), upod("ns", "no-uid", "", "9")}
	meta := metaList("42", pods...)
	meta.Continue = "token"
	meta.APIVersion, meta.Kind = metav1.SchemeGroupVersion.String(), "PartialObjectMetadataList"
	lister := &metaWireLister{fakeLister: &fakeLister{meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) { return meta, nil }}}
	metaBody, err := lister.body(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podBody := encodeProtobuf(t, &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token"}, Items: []v1.Pod{*pods[0], *pods[1], *pods[2]}})
	for name, body := range map[string][]byte{"metadata list": metaBody, "pod list": podBody} {
		t.Run(name, func(t *testing.T) {
			want, err := scanProtobufList(body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := streamScan(iotest.OneByteReader(bytes.NewReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			reflectortest.Equal(t, "stream scan", identities(got), identities(want))
			if len(got.items) != 3 || got.continueToken != "token" || got.resourceVersion != "42" {
				t.Errorf("scanned %+v", identities(got))
			}
		})
	}
	// Truncated anywhere, it is an error, never a shorter list. Cut after
	// the list message, it loses only the empty content type fields. The
	// error is a malformed list (errWire) cut short, never a bare io.EOF.
	full, err := streamScan(bytes.NewReader(metaBody))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(metaBody) {
		got, err := streamScan(bytes.NewReader(metaBody[:n]))
		if err == nil && !reflect.DeepEqual(identities(got), identities(full)) {
			t.Fatalf("truncated at %d of %d bytes: %+v, no error", n, len(metaBody), identities(got))
		}
		if err != nil && (!errors.Is(err, errWire) || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
			t.Fatalf("truncated at %d of %d bytes: %v, want io.ErrUnexpectedEOF within errWire", n, len(metaBody), err)
		}
	}
	// A read error is returned as it is.
	boom := errors.New("connection reset")
	if _, err := streamScan(io.MultiReader(bytes.NewReader(metaBody[:100]), iotest.ErrReader(boom))); err == nil {
		t.Error("a failing reader: no error")
	}
}

// The stream scan reads the same however the bytes arrive: a byte at a
// time, or all at once.
func FuzzScanProtobufListStream(f *testing.F) {
	f.Add(encodeProtobuf(f, &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "3"}, Items: []v1.Pod{*richPod("ns", "a", "ua", "1"), *upod("", "b", "", "2")}}))
	f.Add(envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(6, "9").str(1, "a"))).msg(1, pbuf{}.str(2, "10"))))
	f.Add(envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(1, "a")).msg(1, pbuf{}.str(5, "u")))))
	f.Add(append(envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(1, "a")))), 0x1a, 0x01, 'x'))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := streamScan(iotest.OneByteReader(bytes.NewReader(body)))
		want, werr := scanProtobufList(body)
		if (err == nil) != (werr == nil) {
			t.Fatalf("a byte at a time: %v; at once: %v", err, werr)
		}
		if err != nil {
			return
		}
		if g, w := identities(got), identities(want); !reflect.DeepEqual(g, w) {
			t.Fatalf("a byte at a time %+v, at once %+v", g, w)
		}
	})
}
