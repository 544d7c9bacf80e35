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
// Options keep client-go's names (WithNamespace, WithTweakListOptions,
// WithCustomResyncConfig, WithTransform, WithInformerName; the metadata
// factory's WithMetadataTransform). What client-go has no counterpart for —
// how the informers persist — is one struct, PersistenceOptions, the same
// for the three factories, each field documented with its zero value:
//
//	f := factory.NewSharedInformerFactoryWithOptions(client, resync, db,
//		factory.WithNamespace(ns),
//		factory.WithPersistence(factory.PersistenceOptions{TransformVersion: "strip/1", SyncedAtOpen: true}))
//
// (WithDynamicPersistence and WithMetadataPersistence for the dynamic and
// metadata factories.)
//
// The generated group packages call InformerFor with a constructor,
// newFunc, that hides its ListerWatcher. The informer InformerFor returns
// lists and watches through the ListerWatcher newFunc's informer has when
// newFunc is given the factory's client, so it holds exactly what
// client-go's would, whatever that ListerWatcher does in Go (drop items
// from List, wrap Watch with watch.Filter, rewrite objects). It keeps what
// else newFunc set on its informer: resync period, indexers, transform,
// object description, metrics name, watch error handler, and the handlers
// newFunc registered, each with the resync period it asked for. client-go
// has no getters for most of these; they are read from client-go v0.37.2's
// sharedIndexInformer, inside any depth of client-go's typed wrappers (a
// test pins the fields); the persistent informer is returned inside the
// same wrappers, so a type assertion to cache.TypedSharedIndexInformer[T]
// succeeds as on client-go's factory.
//
// To name the informer's collection the factory learns what newFunc's
// informer requests without reaching the server: it also calls newFunc
// with a clientset whose transport records requests and answers them with
// an error, calls the informer's List and Watch once, and reads the
// resource, namespace and selectors from the recorded URLs. So a
// hand-written constructor, such as kube-scheduler's Pod informer with
// field selector status.phase!=Succeeded,status.phase!=Failed and a
// managedFields-stripping transform, gets the informer client-go's factory
// would give it, persisted in a collection of its own.
//
// A request does not show what a ListerWatcher does in Go. client-go's own
// ListerWatchers (the generated informers', cache.NewListWatchFromClient's)
// list exactly their request; any other, told apart by the Go names of its
// functions, may filter or rewrite, and that code decides what the
// collection holds like a selector does. Such an informer persists only if
// the factory declares PersistenceOptions.ListerWatcherVersion; without it
// InformerFor returns newFunc's own informer, in memory, which starts cold
// every time.
// With it the ListerWatcher's function names and the declared version are
// part of the list identity, and the collection's name ends in
// "listwatch=custom" (apart from the plain list of the same request).
//
// Each informer owns a collection of the file named by what it lists:
// source (typed, dynamic or metadata), group/version/resource, namespace
// and selectors (other list options as a hash), for example
// "typed/apps/v1/deployments ns=prod labels=app=web",
// "typed/v1/pods fields=status.phase!=Succeeded,status.phase!=Failed" or
// "metadata/apps/v1/replicasets".
// Factories with different filters on one file never share a collection,
// and a changed selector starts a new one rather than resuming objects
// listed under the old selector. The names are derived in
// internal/listidentity, with the controller-runtime adapter's, and pinned
// by testdata/list-identity.golden: cache files hold them, so a change to
// them starts every collection cold.
//
// Before a collection is resumed, the informer checks what it was stored
// under (see cache.Persistence); any difference starts it cold:
//
//   - the list identity: source, resource, kind, namespace and list
//     options, as the factory derives them (the collection name says the
//     same in readable form), and for a custom ListerWatcher its functions'
//     Go names and the version declared in ListerWatcherVersion. A
//     closure's name changes with neither its body nor what it closes over
//     (and may change when unrelated code is refactored or inlined
//     differently, which starts cold), so bump the declared version
//     whenever a ListerWatcher's filtering or rewriting changes;
//   - the cluster (see Cluster identity below);
//   - the transform: the version declared in
//     PersistenceOptions.TransformVersion plus the transform function's
//     name. A transform set with WithTransform (WithMetadataTransform), or by
//     newFunc with SetTransform on the informer it builds, or by the caller
//     with SetTransform on the informer InformerFor or ForResource returns,
//     is applied by the persistent informer before objects are stored (the
//     factory's replaces newFunc's, as in client-go). A closure's name
//     does not change with what it closes over, so bump the declared
//     version whenever a transform's output changes.
//
// # Cluster identity
//
// The identity recorded with each collection is read through the factory's
// client when its first informer starts, once per factory, and logged
// once with its kind:
//
//   - the UID of the kube-system namespace (typed: CoreV1().Namespaces();
//     dynamic: the v1 namespaces resource), recorded as the bare UID. The
//     apiserver creates that namespace and never deletes it; its UID is a
//     random UUID, so it differs between clusters and changes when a
//     cluster is recreated;
//   - only if that read is Forbidden — a controller with namespaced RBAC —
//     the UID of the ServiceAccount the client authenticates as, from a
//     SelfSubjectReview (which every authenticated user may create: the
//     default ClusterRole system:basic-user), recorded as
//     "serviceaccount/<namespace>/<name>/<uid>". The apiserver accepts a
//     ServiceAccount token only while that ServiceAccount exists in its own
//     storage with the token's UID, so this UID too is a random UUID minted
//     by this cluster. Recreating the ServiceAccount starts cold once.
//
// A collection recorded under one kind never resumes under the other: a
// controller that gains or loses the right to read kube-system starts cold
// once. Any other error (the apiserver unreachable, a timeout, a 401) is
// not a reason to pick the other kind: the informer retries with backoff
// and resumes nothing until the identity is known. A client that may not
// read kube-system and is not a ServiceAccount (an x509, OIDC or
// static-token user) has no identity to read and must declare one with
// PersistenceOptions.ClusterIdentity: any string that
// differs between clusters and changes when one is recreated. Until then
// its informers never sync and report why to their watch error handler.
//
// Why not the server's address or its CA bundle, which every client
// knows: the address is reused (two test clusters restarted on one
// loopback port, a DNS name moved from a blue to a green cluster) and a
// CA may sign several clusters' servers (an organisation's CA, public
// roots), so neither proves the file is this cluster's. Nor could the
// factories read them well: they get a kubernetes.Interface or a
// dynamic.Interface, not a rest.Config. Through a clientset's
// RESTClient() (a *rest.RESTClient) the base URL (Get().URL()) and the
// *http.Client are reachable, but the CA sits in an *x509.CertPool inside
// wrapped round trippers, which can be compared but not read; a
// dynamic.Interface exposes neither. What every authenticated user may
// read on a v1.37 apiserver with the default policy (discovery, /version,
// /openapi, health endpoints, self reviews; kube-public/cluster-info only
// on kubeadm clusters) names no cluster, except a ServiceAccount's own
// UID. A user UID from another authenticator is assigned outside the
// cluster and the same on every cluster the user reaches (the test
// apiserver's static admin token has UID "admin"), so it is not used.
// Clusters cloned from one etcd backup share every UID; declare an
// identity for them.
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
// WithTransform (here WithMetadataTransform); its namespace and tweak
// function are its filtered constructor's arguments, as here.
//
// A Secret's metadata holds no data field, but its annotations can:
// kubectl apply stores the whole object, data included, in
// kubectl.kubernetes.io/last-applied-configuration. So an informer of
// secrets keeps their metadata in memory, as the typed and dynamic
// factories keep Secrets, unless the program opts in with
// PersistenceOptions.PersistSecrets (controller-runtime's adapter keeps
// metadata Secrets the same way).
//
// # Starting while the apiserver is unreachable
//
// With the default cluster identity an informer cannot prove, while the
// apiserver is down, that its file belongs to this cluster: it hands out
// nothing stored (handlers and listers see an empty cache), is not synced,
// and retries with the reflector's backoff, reporting each failure to its
// watch error handler. With a declared ClusterIdentity the warm start works
// offline: the informer is synced from its file, listers serve the stored
// state, and the watch retries with client-go's backoff until the server
// answers; it then resumes, or relists once after a 410, and catches up.
//
// # Synced means caught up
//
// As with client-go's factories, a synced informer's store reflects a read
// made at or after the informer started: a warm informer is synced once its
// resumed watch has applied the resourceVersion of a consistent limit=1
// read — no full list; short first watches bring the apiserver's bookmark
// about a second after the watch opens on a quiet resource (see
// cache.InformerOptions.SyncedAtOpen and reflector.CatchUp).
// PersistenceOptions.SyncedAtOpen makes warm informers synced on their
// stored state instead, at once, for
// controllers that tolerate a stale start.
//
// # Recovery after a 410
//
// When the apiserver no longer has an informer's stored resourceVersion
// (410 Gone), or the collection owes a list, the informer recovers by what
// changed instead of relisting (see cache.InformerOptions.Recovery): the
// typed factory gives every informer whose ListerWatcher is client-go's own
// a metadata lister (NewMetadataLister: client-go's metadata client, on the
// clientset's transport and rate limiter, with the informer's namespace and
// selectors). The metadata factory's informers recover from their own
// list, which is the metadata list and holds what changed
// (reflector.Recovery.ListInFull): no fetches; outside client-go's scheme
// (custom resources and aggregated APIs alike, which it cannot tell apart
// without discovery) resourceVersions are only told equal or not
// (OpaqueVersions), since an aggregated API's need not be etcd revisions.
// The dynamic factory recovers given a metadata client
// (PersistenceOptions.MetadataClient, which vouches that its resources are
// kube-apiserver's own: built-in or custom, not aggregated). A custom
// ListerWatcher (it may filter in Go, which a metadata list would not) and
// the dynamic factory without one relist in full, reconciled with the
// stored state. The recovery's fetches are planned to fit the typed
// clientset's rate limit.
//
// # Watches keep the server's bytes
//
// An informer whose ListerWatcher is client-go's own (requestOnly above)
// watches through a REST client the factory builds from the clientset's
// group client: the same URL, *http.Client (credentials, user agent,
// transport wrappers) and rate limiter, the same request. Its decoder
// keeps, beside each object it decodes, the object's protobuf message as
// the apiserver sent it, and the informer stores that message instead of
// marshalling the object again when no transform runs (a transform may
// change the object). That marshal was the largest part of what a watch
// update costs a persistent informer beyond client-go's. This client asks
// for protobuf with JSON as the fallback, as client-go's typed clients do
// for built-in types unless their config sets a content type: a clientset
// configured for JSON lists in JSON and watches in protobuf (the objects
// are the same). Warnings in watch responses reach client-go's default
// warning handler rather than one set on the clientset's config. A fake
// clientset, which has no REST client, watches through its own calls.
//
// # Caveats
//
// Where the factory cannot determine what newFunc's informer lists — it
// lists through another client than the one it is given, lists a type no
// typed client of k8s.io/client-go/kubernetes serves (a CRD type of another
// generated clientset, metadata-only objects), or is not client-go's
// informer (or a typed wrapper of it) — or its ListerWatcher is custom and
// no ListerWatcherVersion is declared, InformerFor returns newFunc's own
// informer unchanged, in memory, exactly as client-go's factory does, logs
// why once and counts it in boltinformer_factory_fallbacks_total (see
// PersistenceOptions.Metrics). Finding out that newFunc uses another
// client costs one List request with limit=1 through that client.
//
// The fields read from client-go's informer are private: another client-go
// release may lay them out otherwise. The factory then cannot persist any
// informer built by a newFunc (the generated accessors' included), and says
// so as an error (utilruntime.HandleError) as well as in the metric, with
// reason client-go-layout: pin k8s.io/client-go to the version this
// release of boltinformer reads (v0.37.2).
//
// InformerFor calls newFunc twice, once with the capture clientset and once
// with the factory's client (client-go's factory calls it once). The
// informer it returns is not the one newFunc built: handlers and the watch
// error handler newFunc registered on its own are registered again on the
// persistent one, but whatever newFunc kept of its own informer (a
// registration's HasSynced, its indexer or store) refers to an informer
// that never runs. Register through, and read from, the informer
// InformerFor returns.
//
// InformerFor and ForResource cannot return errors in client-go's
// interfaces. When the factory cannot build a persistent informer it should
// build (a cache file error; for ForResource or a nil newFunc also a type no
// typed client lists: use the dynamic factory) it returns one that never
// syncs and reports the error when run, and WaitForCacheSyncWithContext
// returns the error in SyncResult.Err.
//
// A newFunc's tweak applies to every request, as in client-go. Only the
// options that change what a list holds (the selectors) name the
// collection: a page size or timeout does not.
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
