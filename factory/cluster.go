package factory

import (
	"sync"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/clusterid"
)

// The factories identify the cluster by the UID of its kube-system
// namespace, recorded as the bare UID. A client that may not read it, under
// namespaced RBAC, uses the UID of the ServiceAccount it authenticates as.
// That is recorded as "serviceaccount/<ns>/<name>/<uid>". internal/clusterid
// says why these and nothing else. A client that can read neither declares
// the cluster (PersistenceOptions.ClusterIdentity). A metadata client cannot
// review itself. So a metadata factory that may not read kube-system must
// declare it. The identity is learned once per factory, when its first
// informer starts.

// declareCluster names, in errors, how to declare the cluster's identity.
const declareCluster = "factory.PersistenceOptions.ClusterIdentity"

// clusterSource learns a factory's cluster identity once for all of its
// informers. The zero value is ready. The Source is built on first use.
type clusterSource struct {
	once   sync.Once
	source *clusterid.Source
}

// identity returns the identity a factory records with each of its
// collections. It is the declared one if set. Otherwise it is read through
// the reader newReader builds. The kube-system UID is recorded bare, as before other kinds
// existed.
func (c *clusterSource) identity(declared string, newReader func() clusterid.Reader) bcache.ClusterIdentity {
	if declared != "" {
		return bcache.StaticCluster(declared)
	}
	c.once.Do(func() {
		c.source = clusterid.New(newReader(), clusterid.Options{Component: "boltinformer factory", Declare: declareCluster})
	})
	return c.source.Get
}

// cluster returns the identity recorded with each of f's collections.
func (f *Factory) cluster() bcache.ClusterIdentity {
	return f.identity.identity(f.persistence.ClusterIdentity, func() clusterid.Reader { return clusterid.Typed(f.client) })
}

// cluster returns the identity recorded with each of f's collections.
func (f *DynamicFactory) cluster() bcache.ClusterIdentity {
	return f.identity.identity(f.persistence.ClusterIdentity, func() clusterid.Reader { return clusterid.Dynamic(f.client) })
}

// cluster returns the identity recorded with each of f's collections. A
// metadata client cannot review itself, so without kube-system's UID the
// identity must be declared (PersistenceOptions.ClusterIdentity).
func (f *MetadataFactory) cluster() bcache.ClusterIdentity {
	return f.identity.identity(f.persistence.ClusterIdentity, func() clusterid.Reader { return clusterid.Metadata(f.client) })
}
