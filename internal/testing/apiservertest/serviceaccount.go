package apiservertest

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ServiceAccountConfig returns a client config that authenticates as the
// ServiceAccount namespace/name, with a token from a TokenRequest (valid for
// an hour, and across apiserver restarts: the signing key is kept), and the
// ServiceAccount. The namespace, ServiceAccount, a Role granting rules and
// a RoleBinding of it to the ServiceAccount are created with the admin
// client (the namespace only if missing): the client may do what rules
// allow in that namespace and what the default policy allows every
// authenticated user, nothing else — a controller with namespaced RBAC.
func (s *Server) ServiceAccountConfig(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule) (*rest.Config, *corev1.ServiceAccount, error) {
	admin, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		return nil, nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	sa, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("creating Role %s/%s: %w", namespace, name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("creating RoleBinding %s/%s: %w", namespace, name, err)
	}
	token, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := s.Config()
	cfg.BearerToken = token.Status.Token
	return cfg, sa, nil
}
