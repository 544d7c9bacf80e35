// Package controllerruntime gives a controller-runtime manager a persistent
// cache. Every informer the manager's cache creates is a boltinformer
// informer over one cache file. A restarted manager resumes its watches from
// the file instead of listing everything again. docs/controllerruntime.md
// gives every rule below in full.
//
// # Basics
//
// The switch is one field of manager.Options:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: boltcr.NewCache(boltcr.Options{Path: "/var/cache/my-operator/cache.db"}),
//	})
//
// NewCache builds controller-runtime's own cache (cache.New) and honours
// every cache.Options field. It plugs boltinformer in through
// cache.Options.NewInformer. Multi-namespace caches, per-object caches and
// the typed, unstructured and metadata-only informers stay
// controller-runtime's code.
//
// Each informer gets its own collection, named after what it lists. The name
// holds the form of its objects, the GroupVersionKind, the namespace and the
// selectors. Only an informer that lists exactly the same thing resumes a
// collection. A changed configuration starts a new collection cold.
// Transforms cannot be compared, so their version is declared
// (Options.TransformVersion, Object.TransformVersion).
//
// Field indexes (IndexField) are stored with the objects. An extractor is a
// closure with the same Go name for every field. So a field index is reused
// only if Object.FieldIndexVersions declares its version. Bump that version
// whenever the extractor changes. An undeclared field index is rebuilt at
// every start.
//
// After a 410, informers recover by what changed (see the cache package's
// Recovery). This holds for typed and unstructured informers of built-in
// resources and of the groups in Options.RecoverGroups. A recovery lists the
// collection's metadata, diffs it against the stored objects, and fetches
// only new and changed objects. So a Checkpoint's reconciler gets exactly
// what changed. Metadata-only informers recover from their own list. Other
// informers list in full, and the list is reconciled with the stored state.
// Aggregated APIs are among them, because their resourceVersions need not be
// comparable.
//
// Each collection also records the cluster (Options.Cluster). The rule is
// the factories' rule (see the factory package). A file written against
// another cluster starts cold.
//
// # Caveats
//
//   - Secrets are kept in memory unless Options.PersistSecrets is set. The
//     file is not encrypted.
//   - NewCache opens nothing. The cache's Start opens the file, or the first
//     informer the cache builds does. The file is closed when Start returns,
//     after every informer has flushed. A cache that built informers and never
//     starts holds the file until the process exits. Start it, even with a
//     cancelled context, to release it.
//   - A cache runs once. A second Start returns an error and leaves the
//     running cache alone.
//   - One process at a time holds the file's lock. A second process waits
//     Options.File.LockTimeout. Then every use of its cache fails with an
//     error wrapping persist.ErrLocked. Give every replica its own file.
//     Standby replicas run their caches too, so a failover resumes warm.
//   - A second cache of one process on the same file fails at once, with
//     persist.ErrOpenInProcess.
//   - Register types in the manager's scheme before NewCache builds the
//     cache. The file's codec does not know types added later.
//   - Call IndexField for a declared field before the cache starts.
package controllerruntime
