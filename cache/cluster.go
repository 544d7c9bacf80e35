package cache

import "context"

// ClusterIdentity returns a stable identity of the cluster an informer
// lists from: one that differs between clusters and changes when a cluster
// is recreated, such as the kube-system namespace's UID. An error means the
// identity is not known yet; the informer retries and does not resume
// anything stored until it is.
type ClusterIdentity func(ctx context.Context) (string, error)

// StaticCluster is a ClusterIdentity the caller knows without asking the
// apiserver (a cluster name from configuration, say).
func StaticCluster(id string) ClusterIdentity {
	return func(context.Context) (string, error) { return id, nil }
}
