package factory

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/boltinformer/boltinformer/internal/clusterid"
)

func kubeSystem(uid string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID(uid)}}
}

// forbidKubeSystem makes a fake client's reads of namespaces Forbidden and
// answers self reviews with user (unstructured for a dynamic client).
func forbidKubeSystem(t *testing.T, c *k8stesting.Fake, user authenticationv1.UserInfo, unstructuredReview bool) {
	var review runtime.Object = &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: user}}
	if unstructuredReview {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(review)
		if err != nil {
			t.Fatal(err)
		}
		review = &unstructured.Unstructured{Object: u}
	}
	c.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, metav1.NamespaceSystem, errors.New("namespaced RBAC"))
	})
	c.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, review, nil
	})
}

var ctrlSA = authenticationv1.UserInfo{Username: "system:serviceaccount:team:ctrl", UID: "sa-uid"}

// Both factories record kube-system's UID bare, as they always have. They
// fall back to the ServiceAccount's UID when that read is Forbidden. For a
// user that is not a ServiceAccount, they fail and name the option to
// declare one. The fakes stand in for the RBAC the e2e tests set up.
func TestClusterIdentity(t *testing.T) {
	ctx := context.Background()
	f := NewSharedInformerFactory(fake.NewSimpleClientset(kubeSystem("uid-1")), 0, nil)
	if id, err := f.cluster()(ctx); err != nil || id != "uid-1" {
		t.Errorf("typed factory: cluster %q, %v; want kube-system's UID", id, err)
	}
	f = NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, nil, WithPersistence(PersistenceOptions{ClusterIdentity: "prod-eu"}))
	if id, err := f.cluster()(ctx); err != nil || id != "prod-eu" {
		t.Errorf("typed factory with ClusterIdentity: cluster %q, %v", id, err)
	}
	f = NewSharedInformerFactory(fake.NewSimpleClientset(), 0, nil)
	if _, err := f.cluster()(ctx); err == nil || !strings.Contains(err.Error(), "PersistenceOptions.ClusterIdentity") {
		t.Errorf("typed factory without kube-system: %v, want an error naming PersistenceOptions.ClusterIdentity", err)
	}
	cs := fake.NewSimpleClientset(kubeSystem("uid-1"))
	forbidKubeSystem(t, &cs.Fake, ctrlSA, false)
	f = NewSharedInformerFactory(cs, 0, nil)
	if id, err := f.cluster()(ctx); err != nil || id != "serviceaccount/team/ctrl/sa-uid" {
		t.Errorf("typed factory, kube-system forbidden: cluster %q, %v; want the ServiceAccount's UID", id, err)
	}
	cs = fake.NewSimpleClientset(kubeSystem("uid-1"))
	forbidKubeSystem(t, &cs.Fake, authenticationv1.UserInfo{Username: "alice", UID: "alice"}, false)
	f = NewSharedInformerFactory(cs, 0, nil)
	if _, err := f.cluster()(ctx); !errors.Is(err, clusterid.ErrUnidentified) || !strings.Contains(err.Error(), "PersistenceOptions.ClusterIdentity") {
		t.Errorf("typed factory, kube-system forbidden to a user: %v, want ErrUnidentified naming PersistenceOptions.ClusterIdentity", err)
	}

	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kubeSystem("uid-2"))
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: u}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	df := NewDynamicSharedInformerFactory(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), ns), 0, nil)
	if id, err := df.cluster()(ctx); err != nil || id != "uid-2" {
		t.Errorf("dynamic factory: cluster %q, %v; want kube-system's UID", id, err)
	}
	df = NewDynamicSharedInformerFactory(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), 0, nil, WithDynamicPersistence(PersistenceOptions{ClusterIdentity: "prod-eu"}))
	if id, err := df.cluster()(ctx); err != nil || id != "prod-eu" {
		t.Errorf("dynamic factory with ClusterIdentity: cluster %q, %v", id, err)
	}
	dc := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), ns)
	forbidKubeSystem(t, &dc.Fake, ctrlSA, true)
	df = NewDynamicSharedInformerFactory(dc, 0, nil)
	if id, err := df.cluster()(ctx); err != nil || id != "serviceaccount/team/ctrl/sa-uid" {
		t.Errorf("dynamic factory, kube-system forbidden: cluster %q, %v; want the ServiceAccount's UID", id, err)
	}
}
