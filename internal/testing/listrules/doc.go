// Package listrules tells how kube-apiserver serves a list request, and
// checks the lists of a client that keeps a store against the API's rules.
// Tests use it to assert every list the reflector, the recovery and the
// warm start make.
//
// # Basics
//
// Of classifies a request's resourceVersion, resourceVersionMatch, limit
// and continue token as the API concepts page's table "Semantics for get
// and list" does, and as kube-apiserver's delegator (k8s.io/apiserver
// pkg/storage/cacher/delegator, ShouldDelegateList) serves it: Consistent,
// Any, NotOlderThan, Exact or Continue, or Invalid where the server's
// validation answers 400.
//
// Relist checks a list made by a client whose store already holds the
// collection at some resourceVersion. SyncTarget checks a list whose
// resourceVersion is to prove a store caught up with the server.
//
// # Caveats
//
// resourceVersions are compared as unsigned integers, as etcd-backed
// apiservers compare them. A version that does not parse fails the checks
// that need a comparison.
package listrules
