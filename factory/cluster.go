package factory

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// The factories identify the cluster by the UID of its kube-system
// namespace: it exists in every cluster, is never deleted, and a recreated
// cluster gets a new one. A client that may not read it declares the
// cluster instead (WithClusterIdentity, WithDynamicClusterIdentity,
// WithMetadataClusterIdentity).

// clusterUID reads the kube-system namespace's UID once per factory: the
// first successful read is kept, errors are returned and retried by the
// next call.
type clusterUID struct {
	mu  sync.Mutex
	uid string // guarded by mu; "" until read
}

// get returns the UID, reading it with read unless it is known.
func (c *clusterUID) get(ctx context.Context, read func(ctx context.Context) (string, error)) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uid != "" {
		return c.uid, nil
	}
	uid, err := read(ctx)
	if err != nil {
		return "", fmt.Errorf("boltinformer factory: cluster identity: reading namespace %s: %w (a client that may not read it can declare the cluster's identity: WithClusterIdentity, WithDynamicClusterIdentity or WithMetadataClusterIdentity)", metav1.NamespaceSystem, err)
	}
	if uid == "" {
		return "", fmt.Errorf("boltinformer factory: cluster identity: namespace %s has no UID", metav1.NamespaceSystem)
	}
	c.uid = uid
	return uid, nil
}

// clusterIdentity returns the identity a factory records with each of its
// collections: the declared one if set, else the kube-system namespace's
// UID, read through read once per factory (cached in uid).
func clusterIdentity(declared string, uid *clusterUID, read func(ctx context.Context) (string, error)) bcache.ClusterIdentity {
	if declared != "" {
		return bcache.StaticCluster(declared)
	}
	return func(ctx context.Context) (string, error) { return uid.get(ctx, read) }
}

// cluster returns the identity recorded with each of f's collections.
func (f *Factory) cluster() bcache.ClusterIdentity {
	client := f.client
	return clusterIdentity(f.clusterIdentity, &f.kubeSystemUID, func(ctx context.Context) (string, error) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return string(ns.UID), nil
	})
}

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// cluster returns the identity recorded with each of f's collections.
func (f *DynamicFactory) cluster() bcache.ClusterIdentity {
	client := f.client
	return clusterIdentity(f.clusterIdentity, &f.kubeSystemUID, func(ctx context.Context) (string, error) {
		return readKubeSystemUID(ctx, client.Resource(namespacesResource).Get)
	})
}

// cluster returns the identity recorded with each of f's collections.
func (f *MetadataFactory) cluster() bcache.ClusterIdentity {
	client := f.client
	return clusterIdentity(f.clusterIdentity, &f.kubeSystemUID, func(ctx context.Context) (string, error) {
		return readKubeSystemUID(ctx, client.Resource(namespacesResource).Get)
	})
}

// readKubeSystemUID reads the kube-system namespace's UID with a resource
// client's Get (dynamic: the whole object; metadata: its metadata).
func readKubeSystemUID[T metav1.Object](ctx context.Context, get func(context.Context, string, metav1.GetOptions, ...string) (T, error)) (string, error) {
	ns, err := get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.GetUID()), nil
}
