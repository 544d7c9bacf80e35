package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// readAll reads a list from r, collecting its items with their bytes, and
// each ListMeta seen by meta.
func readAll(r io.Reader) (*List, []Item, []List, error) {
	var items []Item
	var metas []List
	l, err := ReadList(r, func(l *List) { metas = append(metas, *l) }, func(it Item) error {
		it.Raw = bytes.Clone(it.Raw) // the reader's buffer, reused
		items = append(items, it)
		return nil
	})
	return l, items, metas, err
}

// podList is a PodList whose items differ in what their metadata holds.
func podList() *corev1.PodList {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token"}}
	for i, ns := range []string{"ns", "", "other"} {
		p := pod(fmt.Sprint("p-", i))
		p.Namespace, p.UID = ns, types.UID("uid-"+ns)
		list.Items = append(list.Items, *p)
	}
	list.Items[1].UID = ""
	return list
}

// A list the serializer writes, whole or streaming (collections.go), reads
// as the serializer decodes it, however its bytes arrive; the ListMeta is
// told before the first item.
func TestReadListOfTheSerializer(t *testing.T) {
	list := podList()
	// Larger than the reader's buffer: read into a buffer of its own.
	list.Items[2].Annotations = map[string]string{"big": strings.Repeat("x", 100<<10)}
	streaming := protobuf.NewSerializerWithOptions(scheme.Scheme, scheme.Scheme, protobuf.SerializerOptions{StreamingCollectionsEncoding: true})
	var streamed bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(streaming, corev1.SchemeGroupVersion).Encode(list, &streamed); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"whole": encodeAsServer(t, list), "streaming": streamed.Bytes()} {
		for how, r := range map[string]io.Reader{"at once": bytes.NewReader(body), "a byte at a time": iotest.OneByteReader(bytes.NewReader(body))} {
			t.Run(name+" "+how, func(t *testing.T) {
				var metaFirst bool
				l, err := ReadList(r, func(l *List) { metaFirst = l.Continue == "token" }, func(Item) error {
					if !metaFirst {
						t.Error("an item before the ListMeta")
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if l.APIVersion != "v1" || l.Kind != "PodList" {
					t.Errorf("list of %q %q", l.APIVersion, l.Kind)
				}
				checkReadMatchesDecode(t, body)
			})
		}
	}
}

// A list cut short anywhere is an error, never a shorter list, and a read
// error comes back wrapped as ErrMalformed.
func TestReadListTruncated(t *testing.T) {
	body := encodeAsServer(t, podList())
	for n := range len(body) - 4 { // the last four: empty contentEncoding and contentType
		if l, items, _, err := readAll(bytes.NewReader(body[:n])); err == nil {
			t.Fatalf("cut at %d of %d bytes: %+v, %d items, no error", n, len(body), l, len(items))
		}
	}
	boom := errors.New("connection reset")
	_, _, _, err := readAll(io.MultiReader(bytes.NewReader(body[:100]), iotest.ErrReader(boom)))
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, boom) {
		t.Errorf("a failing reader: %v", err)
	}
}

// checkReadMatchesDecode requires ReadList and the serializer to agree on
// body, if the serializer decodes it as a PodList: the ListMeta, each
// item's identity, and each item decoded alone equal to the list's.
func checkReadMatchesDecode(t *testing.T, body []byte) {
	t.Helper()
	l, items, _, err := readAll(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("ReadList: %v", err)
	}
	obj, err := runtime.Decode(decoder(t), body)
	if err != nil {
		t.Fatalf("the serializer cannot decode it: %v", err)
	}
	list := obj.(*corev1.PodList)
	if l.ResourceVersion != list.ResourceVersion || l.Continue != list.Continue {
		t.Errorf("ListMeta: read %q %q, decoded %q %q", l.ResourceVersion, l.Continue, list.ResourceVersion, list.Continue)
	}
	if len(items) != len(list.Items) {
		t.Fatalf("read %d items, decoded %d", len(items), len(list.Items))
	}
	for i, it := range items {
		want := &list.Items[i]
		if it.Namespace != want.Namespace || it.Name != want.Name || it.UID != want.UID || it.ResourceVersion != want.ResourceVersion {
			t.Errorf("item %d: read %s/%s uid %q rv %q, decoded %s/%s uid %q rv %q", i,
				it.Namespace, it.Name, it.UID, it.ResourceVersion, want.Namespace, want.Name, want.UID, want.ResourceVersion)
		}
		alone := &corev1.Pod{}
		if err := alone.Unmarshal(it.Raw); err != nil {
			t.Fatalf("item %d alone: %v", i, err)
		}
		if !reflect.DeepEqual(alone, want) {
			t.Errorf("item %d decoded alone differs from the list's", i)
		}
	}
}

// FuzzReadList: wherever the serializer decodes a body as a PodList and
// ReadList reads it, they agree, and ReadList reads the same however the
// bytes arrive.
func FuzzReadList(f *testing.F) {
	f.Add(encodeAsServer(f, podList()))
	f.Add(encodeAsServer(f, &corev1.PodList{}))
	raw, _ := podList().Marshal()
	u, _ := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Raw: raw, ContentEncoding: "gzip"}).Marshal()
	f.Add(append([]byte(Prefix), u...))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, items, metas, err := readAll(bytes.NewReader(body))
		if err != nil {
			return
		}
		l1, items1, metas1, err := readAll(iotest.OneByteReader(bytes.NewReader(body)))
		if err != nil || !reflect.DeepEqual([]any{l, items, metas}, []any{l1, items1, metas1}) {
			t.Fatalf("read a byte at a time: %+v %+v %v; at once %+v %+v", l1, items1, err, l, items)
		}
		obj, err := runtime.Decode(decoder(t), body)
		if err != nil {
			return // not a list the serializer decodes; nothing to agree with
		}
		if _, ok := obj.(*corev1.PodList); !ok {
			return
		}
		checkReadMatchesDecode(t, body)
	})
}
