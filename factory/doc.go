// Package factory provides drop-ins for client-go's informer factories whose
// informers keep their state in one boltinformer cache file: Factory
// satisfies informers.SharedInformerFactory, DynamicFactory satisfies
// dynamicinformer.DynamicSharedInformerFactory and MetadataFactory satisfies
// metadatainformer.SharedInformerFactory.
//
// # Basics
//
// A controller written against client-go's factory switches by changing the
// constructor:
//
//	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
//	f := factory.NewSharedInformerFactory(client, resync, db) // was informers.NewSharedInformerFactory(client, resync)
//	pods := f.Core().V1().Pods().Lister()                   // generated accessors and listers as before
//
// The generated group packages call InformerFor with a constructor,
// newFunc, that hides its ListerWatcher. The factory learns what newFunc's
// informer lists without reaching the server: it calls newFunc with a
// clientset whose transport records requests and answers them with an
// error, calls the informer's List and Watch once, and reads the resource,
// namespace and selectors from the recorded URLs. Its resync period,
// indexers and transform come from the informer itself (client-go has no
// getters for the resync period and transform; they are read from
// client-go v0.37.2's informer, which a test pins). The factory's informer
// then issues exactly that list and watch through the factory's client. So
// a hand-written constructor, such as kube-scheduler's Pod informer with
// field selector status.phase!=Succeeded,status.phase!=Failed and a
// managedFields-stripping transform, gets the informer client-go's factory
// would give it, persisted in a collection of its own.
//
// Each informer owns a collection of the file named by what it lists:
// source (typed, dynamic or metadata), group/version/resource, namespace
// and selectors (other list options as a hash), for example
// "typed/apps/v1/deployments ns=prod labels=app=web",
// "typed/v1/pods fields=status.phase!=Succeeded,status.phase!=Failed" or
// "metadata/apps/v1/replicasets".
// Factories with different filters on one file never share a collection,
// and a changed selector starts a new one rather than resuming objects
// listed under the old selector.
//
// Before a collection is resumed, the informer checks what it was stored
// under (see cache.Persistence); any difference starts it cold:
//
//   - the list identity: source, resource, kind, namespace and list
//     options, as the factory derives them (the collection name says the
//     same in readable form);
//   - the cluster: the UID of the kube-system namespace, read through the
//     factory's client (typed: CoreV1().Namespaces(); dynamic: the v1
//     namespaces resource; metadata: that resource's metadata) when an
//     informer starts, once per factory. An informer resumes nothing and
//     does not sync until it has read it. A client that may not get
//     kube-system declares the cluster instead with WithClusterIdentity
//     (WithDynamicClusterIdentity, WithMetadataClusterIdentity): any string
//     that differs between clusters and changes when one is recreated;
//   - the transform: the version declared with WithTransformVersion
//     (WithMetadataTransformVersion) plus the transform function's name. A
//     transform set with WithTransform (WithMetadataTransform), or by
//     newFunc with SetTransform on the informer it builds, or by the caller
//     with SetTransform on the informer InformerFor or ForResource returns,
//     is applied by the persistent informer before objects are stored (the
//     factory's replaces newFunc's, as in client-go). A closure's name
//     does not change with what it closes over, so bump the declared
//     version whenever a transform's output changes.
//
// # Metadata-only informers
//
// MetadataFactory's informers store *metav1.PartialObjectMetadata, exactly
// as client-go's metadata client hands them out (it decodes them without a
// TypeMeta; so are they handed out after a warm start), and its listers are
// client-go's metadatalister. Any cache file can hold them whatever scheme
// it was opened with: client-go's scheme.Scheme does not register
// PartialObjectMetadata, and the file's codec knows it without (see
// persist.Options.Scheme). client-go's metadatainformer has one option,
// WithTransform (here WithMetadataTransform); its filtered constructor's
// namespace and tweak function are options here too
// (WithMetadataNamespace, WithMetadataTweakListOptions), beside the
// persistence options the other factories have.
//
// A Secret's metadata holds no data field, but its annotations can:
// kubectl apply stores the whole object, data included, in
// kubectl.kubernetes.io/last-applied-configuration. So an informer of
// secrets keeps their metadata in memory, as the typed and dynamic
// factories keep Secrets, unless the program opts in with
// WithMetadataPersistSecrets (controller-runtime's adapter keeps metadata
// Secrets the same way).
//
// # Starting while the apiserver is unreachable
//
// With the default cluster identity an informer cannot prove, while the
// apiserver is down, that its file belongs to this cluster: it hands out
// nothing stored (handlers and listers see an empty cache), is not synced,
// and retries with the reflector's backoff, reporting each failure to its
// watch error handler. With WithClusterIdentity the warm start works
// offline: the informer is synced from its file, listers serve the stored
// state, and the watch retries with client-go's backoff until the server
// answers; it then resumes, or relists once after a 410, and catches up.
//
// # Caught-up sync
//
// A warm informer is synced with its stored state, which misses what
// changed while the process was down until the watch delivers it. A
// controller that acts on absence (garbage collection, cleanup) should use
// WithWaitCaughtUp (WithDynamicWaitCaughtUp, WithMetadataWaitCaughtUp):
// synced then also waits for the watch to pass a consistent limit=1 read
// taken at start (see cache.InformerOptions.WaitCaughtUp).
//
// # Caveats
//
// Where the factory cannot determine what newFunc's informer lists — it
// lists through another client than the one it is given, lists a type no
// typed client of k8s.io/client-go/kubernetes serves (a CRD type of another
// generated clientset, metadata-only objects), or is not client-go's
// informer — InformerFor returns newFunc's own informer unchanged, in
// memory, exactly as client-go's factory does, and logs why once. Finding
// out that newFunc uses another client costs one List request with limit=1
// through that client.
//
// InformerFor and ForResource cannot return errors in client-go's
// interfaces. When the factory cannot build a persistent informer it should
// build (a cache file error; for ForResource or a nil newFunc also a type no
// typed client lists: use the dynamic factory) it returns one that never
// syncs and reports the error when run, and WaitForCacheSyncWithContext
// returns the error in SyncResult.Err.
//
// A newFunc whose tweak sets a page size or timeout gets the reflector's:
// those options do not change what a list holds.
//
// Two informers cannot write one collection. Factories with different
// namespaces or selectors on one file are fine (a cluster-scoped resource's
// collection is named with the factory's namespace too, so each factory has
// its own copy), but two identically configured factories on one file are
// not: the second one's informer for a resource the first already serves
// reports "collection ... is already open". Share one factory instead, as
// client-go recommends anyway.
//
// Collections for lists a program no longer makes stay in the file until it
// is deleted.
//
// The dynamic and metadata factories cannot tell a cluster-scoped resource
// from a namespaced one without discovery, so their namespace always names
// the collection.
package factory
