package factory

import (
	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/clusterid"
)

// The factories identify the cluster by the UID of its kube-system
// namespace, recorded as the bare UID; a client that may not read it
// (Forbidden: namespaced RBAC) by the UID of the ServiceAccount it
// authenticates as, recorded as "serviceaccount/<ns>/<name>/<uid>" (see
// internal/clusterid for why these and nothing else). A client that can
// read neither declares the cluster (WithClusterIdentity,
// WithDynamicClusterIdentity, WithMetadataClusterIdentity; a metadata
// client cannot review itself, so a metadata factory that may not read
// kube-system must declare it). The identity is learned once per factory,
// when its first informer starts.

// clusterOptions are the factories' clusterid options: the kube-system UID
// is recorded bare, as before other kinds existed.
func clusterOptions(declare string) clusterid.Options {
	return clusterid.Options{Component: "boltinformer factory", Declare: declare}
}

// cluster returns the identity recorded with each of f's collections.
func (f *Factory) cluster() bcache.ClusterIdentity {
	if f.clusterIdentity != "" {
		return bcache.StaticCluster(f.clusterIdentity)
	}
	f.identityOnce.Do(func() {
		f.identity = clusterid.New(clusterid.Typed(f.client), clusterOptions("factory.WithClusterIdentity"))
	})
	return f.identity.Get
}

// cluster returns the identity recorded with each of f's collections.
func (f *DynamicFactory) cluster() bcache.ClusterIdentity {
	if f.clusterIdentity != "" {
		return bcache.StaticCluster(f.clusterIdentity)
	}
	f.identityOnce.Do(func() {
		f.identity = clusterid.New(clusterid.Dynamic(f.client), clusterOptions("factory.WithDynamicClusterIdentity"))
	})
	return f.identity.Get
}

// cluster returns the identity recorded with each of f's collections. A
// metadata client cannot review itself, so without kube-system's UID the
// identity must be declared (WithMetadataClusterIdentity).
func (f *MetadataFactory) cluster() bcache.ClusterIdentity {
	if f.clusterIdentity != "" {
		return bcache.StaticCluster(f.clusterIdentity)
	}
	f.identityOnce.Do(func() {
		f.identity = clusterid.New(clusterid.Metadata(f.client), clusterOptions("factory.WithMetadataClusterIdentity"))
	})
	return f.identity.Get
}
