// Package e2e proves boltinformer's promises against a real kube-apiserver
// and etcd (internal/testing/apiservertest). It holds tests only.
// docs/e2e.md says what each test proves.
//
// # Basics
//
// Every test starts its own server. It drives informers built exactly as a
// controller builds them: a clientset, a ListerWatcher, and an informer over
// a persist.DB. At the end it lists the objects with a separate client. The
// informer's store must hold exactly the same key → resourceVersion map.
//
// The suite covers these promises:
//
//   - A cold start holds exactly the server's objects, with one initial add
//     per object and handler.
//   - A warm restart makes no LIST request. Handlers get the stored state,
//     then the changes made while the process was down.
//   - After a 410 the informer recovers by what changed, or relists once. It
//     never gives a handler an older resourceVersion of a key.
//   - A SIGKILL during a write storm loses no deletion and no object.
//   - Bookmarks alone advance the stored resourceVersion.
//   - An apiserver restart under a running informer costs one relist.
//   - The typed, dynamic and metadata factories match client-go's factories,
//     cold and warm.
//   - Differently filtered factories on one file stay apart.
//   - A file written against one cluster starts cold on another.
//
// Run it with `go test ./e2e/` after `make test-binaries` has built etcd and
// kube-apiserver. The -e2e.objects, -e2e.relist-objects and -e2e.kills flags
// scale the expensive parts. Their defaults are 5000, 2000 and 12.
//
// # Caveats
//
// Each test starts its own etcd and kube-apiserver, one test after another.
// TestFactoryForeignCluster starts two pairs. The suite writes about 16,000
// objects. On 2 cores, under -race, it takes about ten minutes (597 s in
// one run): about four are server start-ups (33, about 5 s each) and
// kube-apiserver restarts (13, about 6 s each), one is creating objects,
// and over two are TestRecoveryAfterChurn waiting for churn to expire a
// resourceVersion (the watch cache keeps at least 75 s of history); that
// test takes almost three minutes in all.
//
// TestInformerChild, TestMetadataFactoryChild and TestRecoveryChild are the
// child halves of other tests. Without the environment those tests set,
// they skip.
//
// Every object the tests watch carries a label, and the informers select on
// it. So the apiserver's own objects never enter a comparison.
package e2e
