package cache

import "context"

// ClusterIdentity returns a stable identity of the cluster an informer
// lists from. The identity differs between clusters and changes when a
// cluster is recreated. The kube-system namespace's UID is one such identity.
// The factory package doc says what else qualifies, and why an address does
// not. Where several kinds of identity may be returned, the value must say
// which. One kind then never matches another. An error means the identity is
// not known yet. The informer retries, and resumes nothing stored until the
// identity is known.
type ClusterIdentity func(ctx context.Context) (string, error)

// StaticCluster is a ClusterIdentity the caller knows without asking the
// apiserver, such as a cluster name from configuration.
func StaticCluster(id string) ClusterIdentity {
	return func(context.Context) (string, error) { return id, nil }
}
