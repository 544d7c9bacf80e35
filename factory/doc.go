// Package factory provides drop-ins for client-go's informer factories. Their
// informers keep their state in one boltinformer cache file. Factory
// satisfies informers.SharedInformerFactory. DynamicFactory satisfies
// dynamicinformer.DynamicSharedInformerFactory. MetadataFactory satisfies
// metadatainformer.SharedInformerFactory. docs/factory.md gives every rule
// below in full.
//
// # Basics
//
// A controller switches by changing the constructor:
//
//	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
//	f := factory.NewSharedInformerFactory(client, resync, db) // was informers.NewSharedInformerFactory(client, resync)
//	pods := f.Core().V1().Pods().Lister()                   // generated accessors and listers as before
//
// Options keep client-go's names, such as WithNamespace and WithTransform.
// How informers persist is one struct, PersistenceOptions, shared by the
// three factories. Each of its fields documents its zero value.
//
// InformerFor returns an informer that lists and watches exactly as the one
// newFunc builds. It keeps newFunc's resync period, indexers, transform and
// handlers. The factory reads these from client-go v0.37.2's private
// informer fields, and a test pins their layout. To learn the resource,
// namespace and selectors, the factory calls newFunc once more with a
// clientset that records requests and fails them.
//
// Each informer owns a collection named by what it lists, for example
// "typed/apps/v1/deployments ns=prod labels=app=web". Differently filtered
// factories on one file never share a collection. A changed selector starts
// a new collection. testdata/list-identity.golden pins the names, because
// files hold them.
//
// # Provenance
//
// Before a collection is resumed, the informer checks its list identity,
// its cluster and its transform. Any difference starts it cold. A closure's
// Go name does not change with its body. So bump TransformVersion or
// ListerWatcherVersion whenever a transform or custom ListerWatcher changes.
//
// The cluster is the kube-system namespace's UID. If that read is Forbidden,
// it is the UID of the client's ServiceAccount. Both are random UUIDs that
// the cluster mints. A client that can read neither declares
// PersistenceOptions.ClusterIdentity.
// Until the identity is known, informers hand out nothing stored and do not
// sync. The apiserver's address and CA are not used, because other clusters
// can share them.
//
// # Sync and recovery
//
// A synced informer's store reflects a read made after it started, as in
// client-go. PersistenceOptions.SyncedAtOpen makes warm informers synced on
// the stored state instead. After a 410, the typed factory's informers
// whose ListerWatcher is client-go's own recover by what changed, through
// NewMetadataLister. The metadata factory recovers from its own list. The
// dynamic factory recovers only given PersistenceOptions.MetadataClient.
//
// # Caveats
//
// InformerFor returns newFunc's own in-memory informer when it cannot tell
// what that informer lists. This covers another client, a type the typed
// clientset does not serve, and a custom ListerWatcher without
// ListerWatcherVersion. It logs why once and counts it in
// boltinformer_factory_fallbacks_total. Another client-go release may lay out
// the private fields otherwise. The factory then reports reason
// client-go-layout as an error.
//
// InformerFor calls newFunc twice. Whatever newFunc kept of its own informer
// refers to an informer that never runs. Register through the informer
// InformerFor returns.
//
// A factory that cannot build an informer it should returns one that never
// syncs. WaitForCacheSyncWithContext returns the error in SyncResult.Err.
//
// Two informers cannot write one collection. Share one factory rather than
// two identical ones on a file. Secrets are kept in memory and listed at
// every start unless PersistenceOptions.PersistSecrets is set. Collections a program no longer
// lists stay in the file until it is deleted.
package factory
