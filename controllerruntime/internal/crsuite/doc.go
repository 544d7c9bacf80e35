// Package crsuite holds, in its test, a harness that runs
// controller-runtime's own pkg/controller and pkg/cache Ginkgo suites
// (v0.25.2) with every cache the suites build routed through boltcr, the
// persistent cache of this module. The package has no code of its own;
// `make test` runs it with the rest of the module, and `make test-crsuite`
// runs it alone.
//
// # Basics
//
// TestControllerRuntimeSuites:
//
//  1. copies sigs.k8s.io/controller-runtime from the module cache into
//     <repository>/_output/crsuite/controller-runtime;
//  2. applies testdata/cache-new-hook.patch: cache.New calls cache.NewHook
//     when it is set, and cache.NewUnhooked is the original cache.New (a
//     manager's default NewCache is cache.New, so pkg/controller's
//     managers take the hook too);
//  3. adds testdata/zz_boltinformer_hook_test.go beside each suite (its
//     package clause renamed to the suite's): it sets NewHook to boltcr.New
//     over a cache file, except for a cache whose Options.NewInformer is
//     set (boltcr sets it for the cache it wraps; a spec that sets it has
//     chosen its own informers, which boltcr refuses, so that cache stays
//     controller-runtime's);
//  4. points the copy's go.mod at this repository's modules (replace) and
//     builds each suite's test binary, with -race when the harness runs
//     with it;
//  5. runs pkg/controller's suite cold, every cache on a new file: its
//     specs are about controllers over a manager's cache, and two of them
//     check that a manager leaks no goroutine, whether stopped or never
//     started (boltcr opens its file at Start, or at its first informer,
//     not when it is built);
//  6. runs pkg/cache's suite twice, side by side, each against its own
//     envtest apiserver and etcd (as every run: the repository's test
//     binaries, through KUBEBUILDER_ASSETS; envtest needs no kubectl for
//     these suites), in a fixed spec order (-ginkgo.seed): cold, every
//     cache on a new file; and warm, every cache on the first file whose
//     last cache has stopped (its Start returned), so that a spec's cache
//     resumes the collections earlier specs' caches left, against the same
//     apiserver (a cache still stopping when the next spec starts holds its
//     file, and one never started keeps its own, so a few caches get a new
//     one: which file a cache gets may vary between runs, what it must see
//     does not);
//  7. reads Ginkgo's JSON report: every spec must pass, except those listed
//     below with the reason a persistent cache cannot pass them.
//
// The counts, the time and where each suite's output is are in the test's
// log (go test -v). routing.json beside each run's report counts, per
// spec, the caches built on boltcr and on controller-runtime's cache.
//
// # Caveats
//
//   - pkg/cache's own specs that set cache.Options.NewInformer (three "non-
//     blocking get" specs) run on controller-runtime's cache: boltcr owns
//     NewInformer.
//   - pkg/controller's suite runs cold only: its specs check controllers,
//     not what a cache resumes, and its goroutine leak specs would see the
//     warm run's heartbeat.
//   - envtest lets kube-apiserver choose its advertise address from the
//     host's default route; a host without one cannot run the suite.
//   - Building the copy needs the module proxy (or a module cache holding
//     controller-runtime's test dependencies): go.mod is completed with
//     -mod=mod.
//   - Two runs at once in the same repository share _output/crsuite and
//     disturb each other.
//
// # Exceptions
//
// None: every spec passes, pkg/controller's (cold) and pkg/cache's (cold
// and warm). Warm, pkg/cache's pass because synced means caught up
// (boltcr's default): while warm informers were synced on their stored
// state, 12 to 27 specs read, right after WaitForCacheSync, a cache lacking
// objects created, or holding objects deleted, since an earlier spec's
// cache wrote the file. A cluster heartbeat runs beside the
// warm run (see testdata/zz_boltinformer_hook_test.go): envtest's etcd is
// otherwise idle, and a warm informer in an idle etcd relists after five
// short watches instead of catching up through the apiserver's bookmark.
//
// Five specs of pkg/cache, each run under three cache options, race the
// informer's sync (see racing in the test). Each asks, with a cancelled
// context, for an informer not yet built, and expects a timeout. If the
// informer syncs before GetInformer's one check, no error comes. In 250
// tries under -race, controller-runtime's own cache returned no error 12
// times, boltcr's at most once. Ginkgo runs a failed spec a second time. Only these
// specs may pass on that second attempt.
package crsuite
