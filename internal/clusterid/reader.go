package clusterid

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// Typed reads through a clientset.
func Typed(client kubernetes.Interface) Reader { return typed{client} }

type typed struct{ client kubernetes.Interface }

func (r typed) KubeSystemUID(ctx context.Context) (string, error) {
	ns, err := r.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.UID), nil
}

func (r typed) Self(ctx context.Context) (authenticationv1.UserInfo, error) {
	review, err := r.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return review.Status.UserInfo, nil
}

// Dynamic reads through a dynamic client: the v1 namespaces resource and
// authentication.k8s.io/v1 selfsubjectreviews.
func Dynamic(client dynamic.Interface) Reader { return dynamicReader{client} }

type dynamicReader struct{ client dynamic.Interface }

var (
	namespacesResource         = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	selfSubjectReviewsResource = authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews")
)

func (r dynamicReader) KubeSystemUID(ctx context.Context) (string, error) {
	ns, err := r.client.Resource(namespacesResource).Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.GetUID()), nil
}

func (r dynamicReader) Self(ctx context.Context) (authenticationv1.UserInfo, error) {
	review := &unstructured.Unstructured{}
	review.SetGroupVersionKind(authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"))
	out, err := r.client.Resource(selfSubjectReviewsResource).Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	var typed authenticationv1.SelfSubjectReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &typed); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("decoding the SelfSubjectReview: %w", err)
	}
	return typed.Status.UserInfo, nil
}

// Metadata reads the kube-system namespace's UID through a metadata
// client. A metadata client can only get, list and watch objects'
// metadata, not create a SelfSubjectReview, so a client that may not read
// kube-system cannot be identified through it: declare the identity.
func Metadata(client metadata.Interface) Reader { return metadataReader{client} }

type metadataReader struct{ client metadata.Interface }

func (r metadataReader) KubeSystemUID(ctx context.Context) (string, error) {
	ns, err := r.client.Resource(namespacesResource).Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.GetUID()), nil
}

func (r metadataReader) Self(context.Context) (authenticationv1.UserInfo, error) {
	return authenticationv1.UserInfo{}, errors.New("a metadata client cannot create a SelfSubjectReview")
}
