package controllerruntime

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// kubeSystemUID is the default cluster identity: the kube-system namespace's
// UID, which differs between clusters and changes when a cluster is
// recreated. A cache whose credentials may not read it (RBAC) falls back
// to the apiserver's URL. The answer is asked once per cache; an error is
// not remembered, so the next informer to start asks again.
func kubeSystemUID(config *rest.Config, httpClient *http.Client) (bcache.ClusterIdentity, error) {
	client, err := kubernetes.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("client for the cluster identity: %w", err)
	}
	var (
		mu sync.Mutex
		id string
	)
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if id != "" {
			return id, nil
		}
		ns, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		switch {
		case err == nil:
			id = "kube-system/" + string(ns.UID)
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			klog.FromContext(ctx).Info("Cannot read the kube-system namespace; the cache file's cluster identity is the apiserver URL (set Options.Cluster to choose one)", "host", config.Host, "err", err)
			id = "host/" + config.Host
		default:
			return "", fmt.Errorf("reading the kube-system namespace for the cluster identity: %w", err)
		}
		return id, nil
	}, nil
}
