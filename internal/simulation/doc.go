// Package simulation is a deterministic, seeded simulation of the whole
// persistent informer: the real cache.Informer, the real cache file
// (persist) and the real reflector, driven against a simulated apiserver,
// so that defects where features meet — restarts, 410s, crashes, damage,
// checkpoints, bounded caches, recovery — are found by a test rather than
// by a user. TestSimulation runs it in make test; make simulate runs more
// seeds. docs/simulation.md says what it found.
//
// # Basics
//
// Server (apiserver.go, watch.go, lister.go) serves one resource, Pods,
// as kube-apiserver does: one global revision counter (writes to other
// resources move it too), every change kept so lists can be served at any
// revision not compacted, a watch cache of the last Window changes (a watch
// from an older revision is answered 410 Expired, as a status or as an
// in-stream ERROR event like a restarted kube-apiserver's), restarts that
// start the watch cache afresh (every older revision expires), compaction
// (continue tokens and exact reads below it expire), paging with
// Limit/Continue, bookmarks, metadata lists (NotOlderThan and "" as
// kube-apiserver serves them) and one-object fetches for a recovery, 403,
// 404, 429 and 500 injected on any kind of request, and objects recreated
// under the same name with a new UID. It is a cache.ListerWatcher that
// reports watch-list semantics unsupported and a reflector.MetadataLister.
//
// A Schedule (schedule.go) is one seed's Config — recovery on or off,
// WarmListBelow, SyncedAtOpen, a bounded or unbounded object cache, page
// size, commit batch size, a checkpoint handler registered before or after
// Run, the watch window, how 410 is told — and its steps: changes, server
// restarts and compactions, injected errors, bookmarks and watch timeouts,
// informer starts, clean stops and crashes (the file keeps only what it
// had committed: a kill at a commit point), flushes, checkpoint
// acknowledgements (late, partial and stale ones), Clear, handlers joining
// late, and damage to the closed file (a journal entry, a record's
// payload). Nothing in a schedule depends on the wall clock.
//
// Run (driver.go) executes a schedule and checks, after every step, once
// the system is quiescent (invariants.go):
//   - a start is synced within the timeout, and then (without SyncedAtOpen)
//     its store equals the server, which has not changed since the start;
//   - while the informer runs, its store and every handler's view settle on
//     the server's objects (UIDs and resourceVersions);
//   - every notification is one client-go could deliver (handler.go): a
//     state the server wrote for that key, a resourceVersion that never
//     goes backwards, adds of keys the handler does not hold, updates whose
//     old is what it holds, and deletions only of objects gone from the
//     server — a live object reported deleted is a failure;
//   - a checkpoint's handler, starting from what the file durably
//     acknowledged, is told every change and deletion since (it settles on
//     the server's objects) and is never given an initial add of a state it
//     acknowledged;
//   - the file passes inspect verify after every stop and crash;
//   - a bounded object cache holds no more decoded objects than its bound.
//
// Shrink (shrink.go) reduces a failing schedule by greedy delta debugging
// within a time budget, keeping removals after which it still fails the
// same way.
//
// # Caveats
//
// A seed fixes the schedule, not the interleaving of the informer's
// goroutines: a failure may need a few runs to reproduce, and a flaky one
// shrinks less.
//
// Not covered: the metadata and dynamic informers, the controller-runtime
// adapter, factories, resync periods, indexers, a WireLister recovery
// (protobuf list bodies), watch-list streaming, clock jumps (checkpoint
// retention's clock is not injectable from outside persist), several
// informers sharing one file, and memory beyond the decoded-object cache's
// count (a tombstone holding a decoded object is not seen).
package simulation
