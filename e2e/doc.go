// Package e2e proves boltinformer's promises against a real kube-apiserver
// and etcd (internal/apiservertest). It holds tests only.
//
// # Basics
//
// Every test starts its own server, drives informers built exactly as a
// controller would (a kubernetes clientset, cache.NewFilteredListWatchFromClient
// and cache.NewSharedIndexInformerWithOptions over a persist.DB), and judges
// the result against the server's own state: at the end it lists the objects
// with a separate client and requires the informer's store to hold exactly
// the same key → resourceVersion map. What the suite proves:
//
//   - TestColdStartMatchesServer: on an empty cache file an informer syncs
//     thousands of ConfigMaps and Pods, holds exactly the server's objects,
//     keeps its indexes right, and gives each handler exactly one
//     OnAdd(obj, true) per object.
//   - TestWarmRestartWithinWindow: a restarted informer makes no LIST
//     request. Handlers get OnAdd(obj, true) for the state on disk, then the
//     changes made while it was down as ordinary adds, updates and deletes.
//     The test logs the cold and warm times to HasSynced.
//   - TestRelistAfterExpiry: after an apiserver restart the stored
//     resourceVersion has expired. The informer relists exactly once,
//     reports objects deleted meanwhile as DeletedFinalStateUnknown carrying
//     the stored object, and does not rewrite unchanged objects. Only
//     resyncing handlers get those unchanged objects.
//   - TestRecoveryAfterChurn: an informer with a metadata lister stops;
//     Pods are updated, deleted, deleted and recreated (new UID) and
//     created, and churn rolls the watch cache past the stored
//     resourceVersion (410, no apiserver restart). A child process recovering
//     is SIGKILLed among its fetches; the next informer recovers (no full
//     list) while Pods keep changing, ends equal to the server, never gives
//     a handler an older resourceVersion of a key, gives a checkpointed
//     handler exactly the changed keys, and reads under a fifth of a full
//     list's bytes in objects (the counted bytes are logged).
//     TestRecoveryFetchCost (-e2e.measure-fetch=N) measures what the
//     recovery's requests cost.
//   - TestFactoryDynamicRecovery: the dynamic factory with a metadata client
//     recovers a custom resource's informer across an apiserver restart:
//     one metadata list and a fetch per changed object, no full list.
//   - TestWarmRestartWatchForbidden: restarted with a client RBAC lets list
//     but not watch (every watch answers 403), the informer lists once after
//     the second refusal, reconciled with the file, and is synced after
//     that list, like a client-go informer with the same client beside it;
//     both keep following the server through relists.
//   - TestKillDuringWriteStorm: an informer in a child process is SIGKILLed
//     at random points during a write storm and restarted on the same file
//     each time. A final informer then converges to the server's state with
//     no lost deletion and no missing object, without relisting.
//   - TestBookmarksAdvanceStoredRV: on an idle resource, watch bookmarks alone
//     advance the committed resourceVersion, and a restart resumes from it.
//   - TestApiserverRestartWhileRunning: kube-apiserver restarts twice under a
//     running informer while objects change; the broken watch is resumed,
//     answered 410, and each restart costs one relist; memory and file end
//     equal to the server.
//   - TestFactoryControllerWarmRestart: examples/podcounter, written only against
//     client-go's informers.SharedInformerFactory, runs on boltinformer's
//     factory: its listers answer from the file, a restart makes no LIST and
//     converges to changes made while it was down, and client-go's own
//     factory gives the same output.
//   - TestFactoryDynamicWarmRestart: a CRD's objects through the dynamic factory
//     warm-restart with no LIST and identical unstructured content.
//   - TestFactoryMetadataDifferential: the metadata factory beside client-go's
//     metadatainformer, all namespaces and one namespace label-selected, on a
//     file opened with client-go's scheme: cold, the same handler calls and
//     objects as client-go's; warm after a stop and after SIGKILLs of a child
//     running it, no LIST, exactly client-go's calls for the missed changes,
//     and client-go's objects, TypeMeta included.
//   - TestFactoryFilters: differently filtered factories on one file stay
//     separate; a changed selector starts a new collection.
//   - TestFactoryInformerForSelector: kube-scheduler's Pod informer,
//     registered through InformerFor with field selector
//     status.phase!=Succeeded,status.phase!=Failed and a
//     managedFields-stripping transform, and a plain Pods informer share one
//     file in two collections; each holds exactly what its selector admits;
//     a Pod that turns Succeeded leaves the first as a delete and stays in
//     the second; after a restart neither lists, and a Pod that failed
//     meanwhile leaves the first as a delete.
//   - TestFactoryInformerForGoFilter: a constructor whose ListerWatcher
//     drops and rewrites ConfigMaps in Go (watch.Filter) and registers a
//     handler on the informer it builds, given to InformerFor and to
//     client-go's factory: neither informer holds or hands out a dropped
//     ConfigMap on a cold start, while running, or after a warm restart (no
//     LIST) across changes made while down; a new ListerWatcherVersion
//     starts the collection cold.
//   - TestFactoryForeignCluster: a file written against one cluster, opened
//     by a factory on another (its own kube-apiserver and etcd), starts cold:
//     no handler is given the first cluster's objects.
//
// Run it with `go test ./e2e/`, after `make test-binaries` has built etcd and
// kube-apiserver. The -e2e.objects, -e2e.relist-objects and -e2e.kills flags
// scale the expensive parts (defaults 5000, 2000 and 12).
//
// # Caveats
//
// Each test starts its own etcd + kube-apiserver pair (TestFactoryForeignCluster
// two), one test after another, and the suite writes about 16,000 objects. On
// a 2-core machine it takes three to four minutes, with or without -race;
// most of that is server start-up and populating; TestRecoveryAfterChurn
// adds about two minutes, waiting for churn to expire a resourceVersion
// (the watch cache keeps at least 75 s of history). TestInformerChild,
// TestMetadataFactoryChild and TestRecoveryChild are the child halves of
// TestKillDuringWriteStorm, TestFactoryMetadataDifferential and
// TestRecoveryAfterChurn; without the environment those tests set, they
// skip.
//
// All objects the tests watch carry a label, and the informers select on it.
// The apiserver's own objects (kube-system ConfigMaps it rewrites at start)
// are therefore never part of a comparison.
package e2e
