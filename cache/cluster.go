package cache

import "context"

// ClusterIdentity returns a stable identity of the cluster an informer
// lists from: one that differs between clusters and changes when a cluster
// is recreated, such as the kube-system namespace's UID (see the factory
// package doc for what else qualifies, and why an address does not). Where
// several kinds of identity may be returned, the value must say which, so
// that one kind never matches another. An error means the identity is not
// known yet; the informer retries and does not resume anything stored until
// it is.
type ClusterIdentity func(ctx context.Context) (string, error)

// StaticCluster is a ClusterIdentity the caller knows without asking the
// apiserver (a cluster name from configuration, say).
func StaticCluster(id string) ClusterIdentity {
	return func(context.Context) (string, error) { return id, nil }
}
