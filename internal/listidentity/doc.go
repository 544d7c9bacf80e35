// Package listidentity names what an informer lists: the one place where
// the factories (package factory) and the controller-runtime adapter
// derive, from what they know of an informer's list, the three names a
// cache file stores with its collection:
//
//   - the collection name (cache.Persistence.Collection): the bucket tree,
//     readable, unique per list;
//   - the list identity (cache.Persistence.ListIdentity): everything that
//     decides which objects come back; a collection stored under another
//     identity starts cold;
//   - the description (cache.Persistence.Description), shown by inspect.
//
// # Basics
//
// A List is what an informer lists: who lists and in which shape
// (Source), the resource and kind, the namespace, and the filters — the
// parameters of its list request that decide which objects come back (see
// Filters: every parameter but the reflector's paging, resuming and
// watching ones). Two informers list the same objects exactly when their
// Lists are equal; any difference gives another collection name and
// another identity, so a changed selector never resumes objects listed
// under the old one.
//
// A List is built from what its caller knows:
//
//   - FromOptions, for the factories, which know the resource, namespace
//     and list options their informers send (for InformerFor, read from
//     the request newFunc's informer makes; see factory/capture.go);
//   - FromRequest, for the controller-runtime adapter, which is handed an
//     opaque ListerWatcher and learns what it lists from the request it
//     would send.
//
// # Two spellings, frozen
//
// The factories and the adapter spelled their names apart before this
// package existed, and cache files in use hold both spellings: a List
// from FromOptions is spelled as the factories always spelled it
// ("typed/apps/v1/deployments ns=prod labels=app=web", a JSON identity),
// one from FromRequest as the adapter did ("typed apps/v1 Deployment
// ns=prod labels=app=web @1a2b3c4d", the request line as identity).
// Converging them would start every existing collection cold and leave
// the old ones in the files until deleted (nothing removes a collection no
// informer opens), for no gain: a factory and a controller-runtime cache
// never share a collection. What they share is here: one rule for which
// request parameters are filters, the namespace, selectors and
// description keys. The goldens in factory and controllerruntime
// (testdata/list-identity.golden) pin both spellings; change neither
// without a reason worth a cold start.
//
// # Caveats
//
// A List is a value; its methods are safe for concurrent use. Filters
// hold what the request sends: parameters this package does not know
// (a newer apiserver's filter) are kept as filters, which can only make
// two lists differ, never merge them. A request does not show what a
// ListerWatcher does in Go; WithListerWatcher records a custom one.
package listidentity
