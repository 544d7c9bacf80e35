// Package controllerruntime gives a controller-runtime manager a persistent
// cache: every informer the manager's cache creates is a boltinformer
// informer over one cache file, so a restarted manager resumes its watches
// from the file instead of listing everything again.
//
// # Basics
//
// The switch is one field of manager.Options:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: boltcr.NewCache(boltcr.Options{Path: "/var/cache/my-operator/cache.db"}),
//	})
//
// NewCache builds controller-runtime's own cache (cache.New) with every
// cache.Options field honoured, and plugs boltinformer in through
// cache.Options.NewInformer. What controller-runtime composes — a
// multi-namespace cache, per-object caches, typed, unstructured and
// metadata-only informers — stays controller-runtime's code.
//
// Each informer gets its own collection in the file, named after what it
// lists, as the apiserver would see the request: the form of its objects
// (typed, unstructured, metadata), the GroupVersionKind, the namespace, the
// label and field selectors. A multi-namespace cache has one collection per
// namespace. A collection is resumed only by an informer that lists exactly
// the same thing; a changed configuration starts a new collection cold.
// Transforms cannot be compared, so their version is declared
// (Options.TransformVersion, Object.TransformVersion).
//
// Field indexes (IndexField) are persisted with the objects. An extractor
// is a closure whose Go name is the same for every field, so an index is
// reused on the next start only if its version is declared in
// Object.FieldIndexVersions; bump the version whenever the extractor
// changes. An undeclared field index is rebuilt from the stored objects at
// every start, when IndexField adds it.
//
// A restart after a downtime longer than the apiserver's watch history
// (about 75 s on a resource that changes), or after any apiserver restart,
// finds the stored resourceVersion gone: the resumed watch is answered 410.
// The typed and unstructured informers of built-in resources (the groups of
// client-go's scheme), and of the custom resources' groups named in
// Options.RecoverGroups, then recover by what changed (see the cache
// package's Recovery): a metadata-only list of exactly the informer's
// collection (its namespace, label and field selectors), a diff of UIDs and
// resourceVersions against the stored objects, and fetches of only the new
// and changed objects, through the informer's own list narrowed to one
// object (or a namespace). Handlers get what a relist gives them without
// the unchanged objects, so a Checkpoint's reconciler gets exactly what
// changed. Metadata-only informers recover from their own list, which is
// the metadata list (no fetches; of any group, resourceVersions outside
// the groups vouched for told only equal or not). Other typed and
// unstructured informers list in full, as controller-runtime's do, and
// the list is reconciled with the stored state the same way: aggregated
// APIs (whose resourceVersions need not be comparable, and which boltcr
// cannot tell from custom resources) and custom resources not named.
//
// Each collection also records the cluster (Options.Cluster): by default
// the kube-system namespace's UID, or, for credentials that may not read
// it (a namespaced controller), the UID of their ServiceAccount, the same
// rule as the factories' (see the factory package doc for why these and
// not the apiserver's address or CA). A file written through one address
// to another cluster, or under the other kind, starts cold.
//
// # Caveats
//
//   - Secrets (in every form) are kept in memory and never written to the
//     file unless Options.PersistSecrets is set: the file is not encrypted.
//   - NewCache opens nothing, as controller-runtime's cache holds nothing
//     before Start: the file is opened by the cache's Start (the manager's
//     start), or before it by the first informer the cache builds
//     (IndexField, GetInformer, Get or List, as a controller's setup may
//     call), and closed when Start returns (the manager stopped), after
//     every informer has flushed. A manager or cluster built and never
//     started, or manager.New failing after it built the cache, holds
//     neither the file nor a goroutine. A cache that built informers and
//     is never started holds the file for the life of the process, as it
//     holds those informers: Start it (a cancelled context will do) to
//     release it. A cache runs once: a second Start returns an error at
//     once and leaves the running cache and its file alone.
//   - The file is locked by one process at a time. A second process opening
//     it waits Options.File.LockTimeout and then the cache's first use
//     (Start, IndexField, GetInformer, Get, List) fails with an error
//     wrapping persist.ErrLocked, as does every later use. Give every
//     replica its own file (an emptyDir or a per-replica volume); leader
//     election does not share it. Standby replicas run their caches too
//     (controller-runtime starts caches before leader election is won), so
//     they keep their own files warm and a failover resumes instead of
//     listing. Two caches of one process on one file: the second fails at
//     once, with persist.ErrOpenInProcess too, saying so.
//   - Types added to the manager's scheme after NewCache built the cache are
//     not known to the file's codec; register them first.
//   - Call IndexField for a declared field before the cache starts, as
//     controllers set up by a manager do.
package controllerruntime
