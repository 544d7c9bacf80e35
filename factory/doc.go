// Package factory provides drop-ins for client-go's informer factories whose
// informers keep their state in one boltinformer cache file: Factory
// satisfies informers.SharedInformerFactory and DynamicFactory satisfies
// dynamicinformer.DynamicSharedInformerFactory.
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
// The generated group packages call InformerFor with a constructor that
// hides its ListerWatcher; the factory rebuilds the same typed-client list
// and watch calls (client.<GroupVersion>().<Resources>(namespace)), with the
// factory's namespace and tweak options, for every type a typed client
// lists, and takes the indexers from the constructor.
//
// Each informer owns a collection of the file named by what it lists:
// source (typed or dynamic), group/version/resource, namespace and the
// selectors the tweak function sets (other tweaked options as a hash), for
// example "typed/apps/v1/deployments ns=prod labels=app=web". Factories with
// different filters on one file never share a collection, and a changed
// selector starts a new one rather than resuming objects listed under the
// old selector.
//
// # Caveats
//
// InformerFor and ForResource cannot return errors in client-go's
// interfaces. When the factory cannot build an informer (a type no typed
// client lists: use the dynamic factory; a cache file error) it returns one
// that never syncs and reports the error when run, and
// WaitForCacheSyncWithContext returns the error in SyncResult.Err.
//
// InformerFor uses the factory's namespace and tweak options for every
// type, as the generated accessors do; a hand-written constructor passed to
// InformerFor that lists with other filters is not honoured.
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
// The dynamic factory cannot tell a cluster-scoped resource from a
// namespaced one without discovery, so its namespace always names the
// collection.
package factory
