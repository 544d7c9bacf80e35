package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// scanProtobufList reads body, a list in Kubernetes protobuf, as the
// stream scanner does, and collects its items with their bytes.
func scanProtobufList(body []byte) (*wireList, error) {
	var items []wireItem
	l, err := scanProtobufListStream(bytes.NewReader(body), func(it wireItem) error {
		it.raw = bytes.Clone(it.raw) // the scanner's buffer, reused
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.items = items
	return l, nil
}

// encodeProtobuf encodes obj as the apiserver does for a client that
// accepts protobuf: its group-version's kind in the envelope.
func encodeProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, v1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeProtobuf decodes body as a typed client does.
func decodeProtobuf(body []byte) (runtime.Object, error) {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return runtime.Decode(scheme.Codecs.WithoutConversion().DecoderToVersion(info.Serializer, v1.SchemeGroupVersion), body)
}

// richPod is a Pod with most of what a real one carries.
func richPod(ns, name, uid, rv string) *v1.Pod {
	p := upod(ns, name, uid, rv)
	p.Labels = map[string]string{"app": name}
	p.Annotations = map[string]string{"note": "x"}
	p.Generation = 3
	p.CreationTimestamp = metav1.Unix(1700000000, 0)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}}
	p.Spec = v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{
		Name: "c", Image: "registry/image:1",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
	}}}
	p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}
	return p
}

func TestScanProtobufListOfTheSerializer(t *testing.T) {
	list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token"}, Items: []v1.Pod{
		*richPod("ns", "a", "ua", "7"),
		*richPod("", "cluster-scoped", "uc", "8"),
		*upod("ns", "no-uid", "", "9"),
		*upod("ns", "no-rv", "ur", ""),
	}}
	body := encodeProtobuf(t, list)
	got, err := scanProtobufList(body)
	if err != nil {
		t.Fatal(err)
	}
	reflectortest.Equal(t, "list", [4]string{got.apiVersion, got.kind, got.resourceVersion, got.continueToken}, [4]string{"v1", "PodList", "42", "token"})
	checkScanMatchesDecode(t, body, got)
	if len(got.items) != 4 {
		t.Fatalf("%d items, want 4", len(got.items))
	}
	reflectortest.Equal(t, "keys", []string{got.items[0].key(), got.items[1].key(), got.items[2].key()}, []string{"ns/a", "cluster-scoped", "ns/no-uid"})
	reflectortest.Equal(t, "identity of a", [3]string{string(got.items[0].uid), got.items[0].resourceVersion, got.items[0].namespace}, [3]string{"ua", "7", "ns"})

	empty, err := scanProtobufList(encodeProtobuf(t, &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}))
	if err != nil || len(empty.items) != 0 || empty.resourceVersion != "5" {
		t.Errorf("empty list: %+v, %v", empty, err)
	}
}

// checkScanMatchesDecode requires the scan of body to agree with decoding
// it. The list's resourceVersion, continue token and each item's identity
// must agree. Each item decoded alone must equal the list's decoded item.
func checkScanMatchesDecode(t *testing.T, body []byte, got *wireList) {
	t.Helper()
	obj, err := decodeProtobuf(body)
	if err != nil {
		t.Fatalf("the serializer cannot decode it: %v", err)
	}
	list := obj.(*v1.PodList)
	if got.resourceVersion != list.ResourceVersion || got.continueToken != list.Continue {
		t.Errorf("list meta: scanned %q %q, decoded %q %q", got.resourceVersion, got.continueToken, list.ResourceVersion, list.Continue)
	}
	if len(got.items) != len(list.Items) {
		t.Fatalf("scanned %d items, decoded %d", len(got.items), len(list.Items))
	}
	decode := itemDecoder(reflect.TypeOf(&v1.Pod{}), got.kind)
	if decode == nil {
		t.Fatalf("no item decoder for %q", got.kind)
	}
	for i := range list.Items {
		want := &list.Items[i]
		it := got.items[i]
		if it.namespace != want.Namespace || it.name != want.Name || it.uid != want.UID || it.resourceVersion != want.ResourceVersion {
			t.Errorf("item %d: scanned %s/%s uid %q rv %q, decoded %s/%s uid %q rv %q", i,
				it.namespace, it.name, it.uid, it.resourceVersion, want.Namespace, want.Name, want.UID, want.ResourceVersion)
		}
		alone, err := decode(it.raw)
		if err != nil {
			t.Fatalf("item %d alone: %v", i, err)
		}
		if !equality.Semantic.DeepEqual(alone, want) || !reflect.DeepEqual(alone, want) {
			t.Errorf("item %d decoded alone differs from the list's", i)
		}
	}
}

// A tiny protobuf writer, to build what the serializer never writes but a
// decoder accepts.
type pbuf []byte

func (b pbuf) tag(num int, typ protowire.Type) pbuf {
	return protowire.AppendTag(b, protowire.Number(num), typ)
}
func (b pbuf) str(num int, s string) pbuf {
	return protowire.AppendString(b.tag(num, protowire.BytesType), s)
}
func (b pbuf) msg(num int, m pbuf) pbuf {
	return protowire.AppendBytes(b.tag(num, protowire.BytesType), m)
}
func (b pbuf) varint(num int, v uint64) pbuf {
	return protowire.AppendVarint(b.tag(num, protowire.VarintType), v)
}
func (b pbuf) raw(p []byte) pbuf { return append(b, p...) }

// envelope wraps a list message as the serializer does.
func envelope(list pbuf) []byte {
	unk := pbuf{}.msg(1, pbuf{}.str(1, "v1").str(2, "PodList")).msg(2, list)
	return append([]byte("k8s\x00"), unk...)
}

// Fields in unusual order, repeated, unknown or absent: the scan agrees
// with the generated Unmarshal.
func TestScanProtobufListUnusualLayouts(t *testing.T) {
	pod := func(meta ...pbuf) pbuf {
		var b pbuf
		for _, m := range meta {
			b = b.msg(1, m)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		list pbuf
		want []string // "ns/name uid rv"
	}{
		{"metadata fields reversed", pbuf{}.msg(2, pod(pbuf{}.str(6, "9").str(5, "u").str(3, "ns").str(1, "a"))),
			[]string{"ns/a u 9"}},
		{"no uid", pbuf{}.msg(2, pod(pbuf{}.str(1, "a").str(3, "ns").str(6, "9"))),
			[]string{"ns/a  9"}},
		{"no metadata", pbuf{}.msg(2, pbuf{}.msg(2, pbuf{}.str(10, "node"))),
			[]string{"  "}},
		{"spec before metadata, unknown fields of every wire type",
			pbuf{}.msg(2, pbuf{}.msg(2, pbuf{}.str(9, "node")).varint(99, 1<<40).raw(pbuf{}.tag(98, protowire.Fixed32Type)).raw([]byte{1, 2, 3, 4}).
				raw(pbuf{}.tag(97, protowire.Fixed64Type)).raw(make([]byte, 8)).
				msg(1, pbuf{}.varint(7, 3).str(1, "a").str(4, "self").str(6, "9").str(3, "ns").str(5, "u"))),
			[]string{"ns/a u 9"}},
		{"metadata twice: merged, the last value wins", pbuf{}.msg(2, pod(pbuf{}.str(1, "a").str(6, "1").str(5, "u"), pbuf{}.str(6, "2").str(3, "ns"))),
			[]string{"ns/a u 2"}},
		{"a field repeated within metadata", pbuf{}.msg(2, pod(pbuf{}.str(1, "a").str(1, "b").str(6, "3").str(6, "4"))),
			[]string{"b  4"}},
		{"list metadata after the items, twice", pbuf{}.msg(2, pod(pbuf{}.str(1, "a"))).msg(1, pbuf{}.str(2, "10")).msg(2, pod(pbuf{}.str(1, "b"))).msg(1, pbuf{}.str(3, "c")),
			[]string{"a  ", "b  "}},
		{"empty strings", pbuf{}.msg(2, pod(pbuf{}.str(1, "a").str(5, "").str(6, ""))),
			[]string{"a  "}},
		{"an empty item", pbuf{}.msg(2, pbuf{}),
			[]string{"  "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := envelope(tc.list)
			got, err := scanProtobufList(body)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range got.items {
				ids = append(ids, fmt.Sprintf("%s %s %s", it.key(), it.uid, it.resourceVersion))
			}
			reflectortest.Equal(t, "items", ids, tc.want)
			checkScanMatchesDecode(t, body, got)
		})
	}
}

// What the generated Unmarshal rejects, the scan rejects: the caller then
// decodes the body whole and reports the decoder's error.
func TestScanProtobufListRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"JSON", []byte(`{"kind":"PodList","items":[]}`)},
		{"uid as a varint", envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.varint(5, 1))))},
		{"items as a varint", envelope(pbuf{}.varint(2, 1))},
		{"truncated length", envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(1, "abc")[:4])))},
		{"truncated varint", append(envelope(pbuf{}), 0x80)},
		{"a group", envelope(pbuf{}.raw(pbuf{}.tag(9, 3)).raw(pbuf{}.tag(9, 4)))},
		{"field number zero", envelope(pbuf{}.raw([]byte{0x02, 0x00}))},
		{"content encoding", append([]byte("k8s\x00"), pbuf{}.msg(2, pbuf{}).str(3, "gzip")...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := scanProtobufList(tc.body); !errors.Is(err, errWire) {
				t.Errorf("scan = %+v, %v; want an error", got, err)
			}
		})
	}
}

// itemDecoder decodes only generated protobuf types, into the list's item
// kind.
func TestItemDecoder(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    reflect.Type
		kind string
		ok   bool
	}{
		{"pod", reflect.TypeOf(&v1.Pod{}), "PodList", true},
		{"another kind", reflect.TypeOf(&v1.Pod{}), "ConfigMapList", false},
		{"not a pointer", reflect.TypeOf(v1.Pod{}), "PodList", false},
		{"metadata", reflect.TypeOf(&metav1.PartialObjectMetadata{}), "PartialObjectMetadataList", true},
		{"not protobuf", reflect.TypeOf(&unstructured.Unstructured{}), "UnstructuredList", false},
		{"no type", nil, "PodList", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := itemDecoder(tc.t, tc.kind) != nil; got != tc.ok {
				t.Errorf("itemDecoder = %v, want %v", got, tc.ok)
			}
		})
	}
}

// FuzzScanProtobufList: wherever the serializer decodes a body as a list
// and the scan succeeds, they agree.
func FuzzScanProtobufList(f *testing.F) {
	f.Add(encodeProtobuf(f, &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "3"}, Items: []v1.Pod{*richPod("ns", "a", "ua", "1"), *upod("", "b", "", "2")}}))
	f.Add(envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(6, "9").str(1, "a"))).msg(1, pbuf{}.str(2, "10"))))
	f.Add(envelope(pbuf{}.msg(2, pbuf{}.msg(1, pbuf{}.str(1, "a")).msg(1, pbuf{}.str(5, "u")))))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := scanProtobufList(body)
		if err != nil {
			return
		}
		obj, derr := decodeProtobuf(body)
		if derr != nil {
			return // not a list the serializer knows; nothing to agree with
		}
		if _, ok := obj.(*v1.PodList); !ok {
			return
		}
		checkScanMatchesDecode(t, body, got)
	})
}
