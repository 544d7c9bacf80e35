package recovery

import (
	"bytes"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkScanProtobufListStream reads a page of 1,000 items as a recovery
// does: a PodList of rich Pods, whose bytes dominate, and a metadata list,
// whose tags and varints dominate.
func BenchmarkScanProtobufListStream(b *testing.B) {
	pods := make([]*v1.Pod, 1000)
	podList := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "2000", Continue: "token"}}
	for i := range pods {
		pods[i] = richPod("ns", fmt.Sprintf("pod-%d", i), fmt.Sprintf("uid-%d", i), fmt.Sprint(1000+i))
		podList.Items = append(podList.Items, *pods[i])
	}
	meta := metaList("2000", pods...)
	meta.APIVersion, meta.Kind = metav1.SchemeGroupVersion.String(), "PartialObjectMetadataList"
	raw, err := meta.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	unk, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: meta.APIVersion, Kind: meta.Kind}, Raw: raw}).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"pods":     encodeProtobuf(b, podList),
		"metadata": append([]byte("k8s\x00"), unk...),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if _, err := scanProtobufListStream(bytes.NewReader(body), func(wireItem) error { n++; return nil }); err != nil || n != len(pods) {
					b.Fatalf("%d items, %v", n, err)
				}
			}
		})
	}
}
