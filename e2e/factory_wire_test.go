package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/wire"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// TestFactoryStoresWirePayloads: a factory's Pod informer stores each
// watched Pod from the protobuf message the apiserver sent, without
// marshalling it again, and that record is byte for byte the one marshalling
// the decoded Pod gives (the apiserver and this client encode the same
// way). With a transform, which may change the object, the payload is not
// used.
func TestFactoryStoresWirePayloads(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, "wire")
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	const n = 5
	for i := range n {
		if _, err := admin.CoreV1().Pods("wire").Create(ctx, pod("wire", fmt.Sprintf("p-%d", i), "wire"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name      string
		opts      []factory.Option
		payloads  bool
		transform func(*corev1.Pod)
	}{
		{name: "no transform", payloads: true},
		{name: "transform", opts: []factory.Option{factory.WithTransform(func(obj interface{}) (interface{}, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.ManagedFields = nil // in place, as transforms usually do
			}
			return obj, nil
		})}, transform: func(p *corev1.Pod) { p.ManagedFields = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := cachePath(t)
			db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(srv.Config()) // no content type set
			if err != nil {
				t.Fatal(err)
			}
			f := factory.NewSharedInformerFactoryWithOptions(cs, 0, db, tc.opts...)
			informer := f.Core().V1().Pods().Informer()
			collection := requirePersistent(t, "pods", informer).Collection().Name()
			stop := make(chan struct{})
			f.Start(stop)
			f.WaitForCacheSync(stop)

			found0, _ := wire.Stats()
			patches := 0
			for round := range 2 {
				for i := range n {
					patch := fmt.Appendf(nil, `{"metadata":{"labels":{"round":"%s-%d"}}}`, tc.name[:2], round)
					if _, err := admin.CoreV1().Pods("wire").Patch(ctx, fmt.Sprintf("p-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
					patches++
				}
			}
			// The informer holds every Pod's last version.
			want := map[string]*corev1.Pod{}
			poll.Until(t, time.Minute, "the informer to see every patch", func() bool {
				for i := range n {
					key := fmt.Sprintf("wire/p-%d", i)
					server, err := admin.CoreV1().Pods("wire").Get(ctx, fmt.Sprintf("p-%d", i), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					obj, ok, err := informer.GetStore().GetByKey(key)
					if err != nil || !ok || obj.(*corev1.Pod).ResourceVersion != server.ResourceVersion {
						return false
					}
					want[key] = obj.(*corev1.Pod)
				}
				return true
			})
			found1, _ := wire.Stats()
			close(stop)
			f.Shutdown()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			if used := found1 - found0; tc.payloads && used < int64(patches) {
				t.Errorf("%d of %d watched updates were stored from their payload", used, patches)
			} else if !tc.payloads && used != 0 {
				t.Errorf("with a transform, %d updates were stored from their payload, want none", used)
			}
			records, err := inspectfile.ReadRecords(path, collection)
			if err != nil {
				t.Fatal(err)
			}
			codec := persist.NewCodec(scheme.Scheme)
			for key, p := range want {
				rec, err := codec.Encode(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(records[key], rec) {
					got, err := codec.Decode(records[key])
					t.Errorf("%s: the stored record differs from the record of the Pod the informer holds (decoded: %v, %v)", key, got, err)
				}
				if tc.transform != nil && len(p.ManagedFields) != 0 {
					t.Errorf("%s: the transform did not run", key)
				}
			}
		})
	}
}
