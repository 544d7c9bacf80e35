package clusterid

import "errors"

// ErrUnidentified means the client may not read kube-system and is not a
// ServiceAccount (or may not review itself): no identity can be read, and
// one must be declared. The informer keeps retrying, so that a grant added
// later is picked up.
var ErrUnidentified = errors.New("the cluster cannot be identified through this client")
