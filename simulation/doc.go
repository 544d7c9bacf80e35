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
// Server (apiserver_test.go, watch_test.go, lister_test.go) serves one resource, Pods,
// as kube-apiserver does: one global revision counter (writes to other
// resources move it too), every change kept so lists can be served at any
// revision not compacted, a watch cache of the last Window changes (a watch
// from an older revision is answered 410 Expired, as a status or as an
// in-stream ERROR event like a restarted kube-apiserver's), restarts that
// start the watch cache afresh (every older revision expires), compaction
// (continue tokens and exact reads below it expire), paging with
// Limit/Continue, bookmarks, metadata lists and one-object fetches for a
// recovery, 403, 404, 429 (with Retry-After) and 500 injected on any kind
// of request, and objects recreated under the same name with a new UID. It
// is a cache.ListerWatcher that reports watch-list semantics unsupported
// and a recovery.Lister.
//
// It is as weak as the API allows (apiservers_test.go): one to three apiservers
// behind one address, each request landing on any of them, each with a
// watch cache that may lag etcd. Reads follow kube-apiserver's rules: ""
// is consistent; "0" is served from a cache at its position, older than
// the newest revision but never newer; NotOlderThan from a cache once it
// has reached the version (or 504 "Too large resource version" when it
// does not in time); Exact, the legacy exact read (a version and a Limit
// without a match) and continue tokens from etcd. A watch from a version a
// cache has not reached waits for it. Pages may hold fewer items than
// their Limit, a cache may ignore Limit, and bookmarks may be withheld for
// several steps. In a third of the seeds the server sends bytes where a
// real one does (wirelister_test.go): watches as protobuf streams read by
// client-go's stream watcher through wire.Decoder, and the recovery's
// lists through a WireListerWatcher (recovery.Lister's ListObjectsWire and
// ListMetadataWire); some of those bodies are cut mid-stream.
//
// Faults strike mid-operation (faults_test.go): a step arms a trigger that
// fires inside the server's handling of the n-th list, page (a continued
// request), metadata list, fetch or watch from then on, or after the n-th
// group commit of the file. It compacts etcd (the continue token the
// request carries expires), writes an object (between a metadata list and
// its fetches, between two pages), restarts one or every apiserver, ends
// the watches, fails the request, or crashes the process. A crash copies
// the file as committed at that moment (a commit point, never half a
// transaction); the driver then kills the informer and starts it from that
// image (midop_test.go).
//
// A slow apiserver holds requests (faults_test.go): a hold trigger makes the
// n-th request of a kind wait inside the server while the next steps, which
// do not wait, run; the driver's next wait releases it. Interleave
// (interleave_test.go), from a generator of its own, cuts operations halfway
// with it: a start that does not wait, then a stop or a crash; a 410's
// recovery with writes before and during it, then a stop, a crash, another
// 410, the watches' end or a handover. A handover (stale_test.go) replaces the
// running informer by a new one on the same open file, as a controller that
// loses its leader lease and wins it back does, and the user keeps the old
// informer, its checkpoint and its indexer; a stale-calls step calls them.
// A checkpoint's handler may acknowledge in place, as it is given objects,
// before the informer is synced too. With Lag, one apiserver may be slow
// (SlowCache, a second one where the seed has one): its cache falls further
// behind and answers more reads at versions it has not reached with 504. Cut bodies may end at a
// field's boundary (FieldCuts), as a streamed list dropped between two
// writes ends.
//
// A Schedule (schedule_test.go) is one seed's Config — recovery on or off,
// WarmListBelow, SyncedAtOpen, a bounded or unbounded object cache, page
// size, commit batch size, a checkpoint handler registered before or after
// Run, the watch window, how 410 is told, the server's weaknesses — and its
// steps: changes, server restarts (of one apiserver or all) and
// compactions, injected errors, armed triggers, spells without bookmarks,
// bookmarks and watch timeouts, informer starts, clean stops and crashes
// (the file keeps only what it had committed: a kill at a commit point),
// flushes, checkpoint acknowledgements (late, partial and stale ones),
// Clear, handlers joining late, and damage to the closed file (a journal
// entry, a record's payload). Some steps do not wait for the informer to
// settle: the next one comes while it still works. The weak server's
// choices come from a generator of their own (weakschedule_test.go), so every
// seed keeps the steps it had before them. Nothing in a schedule depends
// on the wall clock. In a third of the seeds the informer runs client-go's
// backoff (800 ms doubling to 30 s) on a virtual clock that a goroutine
// moves to the next deadline every few milliseconds (clock_test.go).
//
// Generate enriches each seed's base schedule (content_test.go) from a
// generator of its own, so the base stays what it was: the differential
// mode, rich content (names with '.' and '-', which sort before the key
// separator '/', a namespace whose name extends another's, 253-character
// names, 63-character namespaces and label values, annotations of any
// bytes, index values longer than bbolt's 32 KiB key limit, objects larger
// than the cache's byte bound), a byte-bounded cache, and damage of every
// kind the file can hold (damagekinds_test.go: a collection sub-bucket missing,
// a record's header, an index entry, a meta value). The regression seeds
// run their base schedules.
//
// Run (driver_test.go) executes a schedule and checks, after every step that
// waits, once the system is quiescent (invariants_test.go); a trigger's write
// during that wait starts the check again against the new state:
//   - a start is synced within the timeout, and then (without SyncedAtOpen)
//     its store equals the server, which has not changed since the start
//     (unless a trigger wrote meanwhile: then a state it held since);
//   - while the informer runs, its store and every handler's view settle on
//     the server's objects (UIDs and resourceVersions);
//   - every notification is one client-go could deliver (handler_test.go): a
//     state the server wrote for that key, a resourceVersion that never
//     goes backwards, adds of keys the handler does not hold, updates whose
//     old is what it holds, and deletions only of objects gone from the
//     server — a live object reported deleted is a failure;
//   - every read a user makes agrees with the server's objects (reads_test.go):
//     the indexer's Get, GetByKey, List, ListKeys, ByIndex, IndexKeys,
//     Index and ListIndexFuncValues over four indexes (namespace, a label
//     every change sets, a multi-valued one, one over an annotation), keys
//     the server lacks, and the typed Pod lister a user builds on the
//     indexer;
//   - the file's commits succeed, and a clean stop's Close does;
//   - a checkpoint's handler, starting from what the simulation's own model
//     of the checkpoint (oracle_test.go) says the file durably acknowledged, is
//     told every change and deletion since (it settles on the server's
//     objects) and is never given an initial add of a state certainly
//     acknowledged; the model never reads the file, whose checkpoint must
//     be one the model allows after every stop and crash;
//   - in the differential mode (differential_test.go) client-go's informer runs
//     beside ours on a mirror server, with the same handlers, and each
//     handler's notifications agree key by key wherever neither informer
//     listed; no handler gets an add with isInInitialList true after the
//     settled point it joined at;
//   - the file passes inspect verify after every stop and crash;
//   - a bounded object cache holds no more decoded objects, nor bytes, than
//     its bounds, and reading an object larger than the byte bound evicts
//     no other;
//   - the watch error handler is never given a failure that wraps io.EOF,
//     which reads as a stream that closed normally;
//   - what a user kept of a replaced informer refuses the file: its
//     Checkpoint, and its checkpoint's Ack, AckDeleted and Clear, fail with
//     persist.ErrClosed, and its indexer returns a state the server wrote
//     or that error.
//
// Shrink (shrink_test.go) reduces a failing schedule by greedy delta debugging
// within a time budget, keeping removals after which it still fails the
// same way. TestSimulation runs each schedule in a process of its own
// (process_test.go), so a panic on one of the informer's goroutines fails
// its schedule, with the panic and the trace, rather than the whole run,
// and a run that makes no progress for three timeouts (a hang) fails with
// the goroutines running the library's code.
//
// # Caveats
//
// A seed fixes the schedule, not the interleaving of the informer's
// goroutines, nor which request a trigger meets, which apiserver serves a
// request and how far a lagging cache has come (the server's generator is
// consumed in the order requests arrive): a failure may need a few runs to
// reproduce, and a flaky one shrinks less.
//
// The checkpoint model keeps, per key, the states the file may hold: some
// outcomes depend on when a commit ran, which only a commit observed to
// begin after an acknowledgement tells. It also follows whether the file
// holds the collection's resourceVersion, without which a start is cold
// and drops every checkpoint. It compares states as the handler
// sees them: an acknowledgement of an object the key no longer holds counts
// as a tombstone. After damage that may start the collection cold it
// allows anything, so the checkpoint oracle is weaker there.
//
// The differential compares only settled points before which neither
// informer made a list request: a list's notifications legitimately differ
// from a watch's (differential_test.go says how).
//
// Not covered: the metadata and dynamic informers, the controller-runtime
// adapter, factories, resync periods, the informer's own list in protobuf
// (only watches and the recovery's lists are bytes), JSON bodies,
// watch-list streaming, clock jumps (checkpoint retention's clock is not
// injectable from outside persist), several informers sharing one file,
// crashes in the middle of a bbolt transaction, a full disk, and memory
// beyond the decoded-object cache's count and bytes (a tombstone holding a
// decoded object is not seen).
package simulation
