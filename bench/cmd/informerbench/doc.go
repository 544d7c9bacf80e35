// Command informerbench measures boltinformer side by side with client-go
// v0.37.2's informer against a real kube-apiserver, each informer in its own
// process so that RSS is honest.
//
// # Basics
//
//	informerbench [flags]          populate Pods, measure, print, write results
//	informerbench demo [flags]     a short cold start / warm restart demonstration
//	informerbench plot [flags]     redraw the sync-time plot from saved results
//	informerbench report [flags]   print the tables of saved results again
//	informerbench churn [flags]    steady state under a churn of changes, both informers side by side
//	informerbench recover [flags]  restarts after a downtime longer than the watch history, by amount changed or by downtime
//
// Without --kubeconfig it starts etcd and kube-apiserver itself
// (internal/apiservertest; build them once with `make test-binaries`). It
// creates N Pods unless they exist — realistic ones (internal/fixture across
// 50 namespaces and 500 node names, as a scheduler leaves them: about 6 KB of
// protobuf with the apiserver's managedFields) or, with --pod-size small,
// one-container ones of about 2.7 KB — runs client-go once in each wire format
// unmeasured (the watch cache memoizes serializations per format), then runs
// every variant (or those --variants names) --reps times, rotating their
// order between repetitions, and reports medians:
//
//   - client-go cold sync, JSON and protobuf, with client-go's default
//     WatchListClient gate (the initial state streams over a watch) and with
//     it off (a LIST): the informer a generated informer factory builds;
//   - boltinformer cold (empty file); warm restart within the watch-cache
//     window, synced once caught up with a consistent read (the default)
//     and with SyncedAtOpen (synced on the stored state), each after its
//     own churn, in alternating order; warm restart with a 1,000-object
//     cache (bounded memory); and, each after its own churn and a forced
//     410 (the apiserver is restarted), in alternating order, warm restart
//     with InformerOptions.Recovery (bolt-recover: a metadata lister of the
//     same Pods and selector, factory.NewMetadataLister over the child's
//     clientset, as the typed factory sets it up, so it recovers by what
//     changed) and without it (bolt-410: a relist through the store);
//   - for every start, its stages, through client-go's public interfaces
//     only (and, for boltinformer, when the apiserver accepted its first
//     watch: reflector.Observer): the informer's own HasSyncedChecker, a
//     lister List made at once (its length checked), and each of two
//     handler registrations' HasSyncedChecker (a counting handler and one
//     that queues each object's key in a client-go workqueue), the last of
//     which is "synced";
//   - the decode floor: the cache file's records decoded with boltinformer's
//     codec, and the same Pods' bare protobuf with Pod.Unmarshal, on
//     GOMAXPROCS goroutines without any informer, to which the time until
//     every handler has its initial adds is compared;
//   - watch throughput (unless --updates 0): the child holds its watch streams (reading them
//     into memory) while the parent patches Pods, then releases them and
//     times the handler through the backlog, so the figure is the
//     informer's capacity rather than the apiserver's write rate; for
//     boltinformer also until the last update is committed, and how far
//     the committed resourceVersion trails the applied one;
//   - Get/List/ByIndex latency on the synced indexers, and the cache file's
//     size against the objects' protobuf size;
//   - for every start, its requests for Pods (full LISTs; counted apart,
//     the limit=1 consistent reads of a catching-up warm start and a
//     recovery's metadata-list pages and fetches, its lists of one object
//     or one namespace; and watches) and its cost to the control plane:
//     bytes read from the apiserver (on the wire, and as encoded before
//     gzip) and the CPU seconds kube-apiserver and etcd used meanwhile
//     (/proc/<pid>/stat, so only with a local apiserver), beside their idle
//     rate, and the child's own CPU seconds.
//
// Throughout the measurement a cluster heartbeat renews one Lease every
// 200 ms (heartbeat.go), standing for the node and leader-election Leases
// every live cluster writes: a warm start synced when caught up needs etcd
// to move after its watch opens. It writes no Pod, and runs for every
// variant alike.
//
// Memory is reported as private memory (RssAnon) first, then VmRSS, which
// also counts pages of the memory-mapped cache file. A child does not run
// in a cgroup of its own, so there is no memory.current to report.
//
// The churn subcommand (churn.go; `make bench-churn`) measures what a
// controller pays between restarts. It creates --pods Pods as above (default
// 100k), then runs two children side by side for the whole run (the hidden
// churn-child subcommand, churnchild.go): client-go's informer as a user
// builds it (informers.NewSharedInformerFactory(...).Core().V1().Pods()) and
// boltinformer's typed factory on a fresh cache file with persist's defaults
// (group commit, fsync on; --batch-interval sets the group commit's
// interval), both in protobuf, each with one handler; with --bounded N a
// third, boltinformer's typed factory with a cache of N decoded objects
// (factory.PersistenceOptions.CacheObjects) on a file of its own. The children start one at
// a time, each sampled every --start-sample (default 250ms) from its spawn
// until its handler has synced and its file is flushed: the cold start's
// peak private memory. Once every handler has synced, the parent changes
// Pods at --rate per second (default 100) for --duration
// (default 10m): merge patches of an annotation, creates and deletes (grace
// period 0) in the --mix 80,10,10, paced by a token bucket with at most
// --inflight requests outstanding (churndrive.go). Updates pick their Pod
// uniformly, or with --skew zipf:S by a Zipf law over the Pods in a random
// order, so that a few Pods scattered over the key space take most of them
// (churnskew.go); deletes pick uniformly. The report says how skewed the
// updates were: the distinct Pods updated, and the updates per Pod updated
// within 25,000 changes (about what persist's journal gathers between
// folds). Every create and patch carries informerbench/sent, the writer's
// clock just before the request; each handler times its adds and updates
// against it (one machine, one clock) and counts every event. Every --sample (default 5s) the parent
// reads each child's /proc/<pid>/stat (CPU seconds), io (wchar: bytes handed
// to write syscalls; write_bytes: bytes sent to the block layer — 0 on
// tmpfs, so put TMPDIR on a disk) and status (RssAnon) (churnproc.go). At
// the end each child waits until it has seen every change that succeeded,
// the parent takes a last sample, and prints per informer: CPU-seconds and
// CPU µs per event, bytes written in total and per event, RssAnon at start,
// end and peak, latency p50/p99/max, events handled, the cache file's size,
// and each boltinformer / client-go for CPU, p99 latency and peak RssAnon.
// Then (unless --restart-settle is 0) each child is restarted in turn —
// client-go cold, as it always starts, boltinformer warm on the file the
// churn left — and sampled from its spawn until --restart-settle (default
// 15s) after its handler synced, without the bench returning the start's
// garbage to the OS: the restart's peak private memory, and what the
// process still holds once it settled. It saves churn.json,
// churn-samples.csv (a phase column tells cold starts, churn and restarts
// apart) and plots over time of RssAnon, CPU and write_bytes during the
// churn, and of RssAnon during the starts (churn-*.svg), in --out (default
// bench/results/churn-<pods>). With --cpuprofile DIR each child also writes
// a CPU profile of the churn alone (from every child synced to every change
// seen) to DIR/churn-<informer>.pprof; with --heapprofile DIR, per phase
// (cold, churn, restart), a heap profile taken at the highest live heap it
// reached, to DIR/heap-<phase>-<informer>.pprof, and the report gives those
// peaks; and, after a collection each, heap-churn-start-<informer>.pprof and
// heap-churn-end-<informer>.pprof, whose difference in allocations
// (go tool pprof -diff_base) is what the churn allocated.
//
// The recover subcommand (recover.go; `make bench-recover` and `make
// bench-recover-downtime`) measures restarts after a downtime longer than
// the apiserver's watch history (about 75 s in kube-apiserver v1.37). It
// creates --pods Pods (default 100k), warms the watch cache up and fills
// boltinformer's file with an unmeasured cold start, then measures points,
// --reps times each, every start in its own child process, in an order
// rotated by repetition and point:
//
//   - --changed 0.1%,1%,10% (the default; counts such as 1000 or 1k work
//     too): before each boltinformer start that many Pods change while no
//     informer runs, by the --mix weights (default 80,5,10,5): label
//     updates, deletes, deletes and re-creates under the same name (a new
//     UID), and creates, as many creates as deletes so the collection
//     keeps its size; the Pods are picked at random (--seed). Then, before
//     every start, kube-apiserver is restarted (etcd kept): this is how
//     "beyond the window" is forced, since the new apiserver's watch
//     history starts at its own list, so a watch from the stored
//     resourceVersion answers 410. The starts: bolt-recover (with
//     Recovery), bolt-recover-full (with Recovery whose lister refuses
//     metadata lists, as an aggregated API may: the full-list fallback,
//     one list read from its bytes, only the changed items decoded),
//     bolt-410 (without Recovery: a relist through the store), and client-go
//     protobuf in watch-list and in LIST mode, cold after the same
//     apiserver restart (no Pods change before a client-go start: a cold
//     start lists whatever is there, and the shared cache file must be
//     exactly as old as the changes the next boltinformer start finds).
//     For each it reports the time to informer synced (for boltinformer,
//     only once its store is consistent with a read taken at start) and
//     to every handler done, bytes read (as encoded, and on the wire), the
//     CPU seconds of kube-apiserver, etcd and the child, and the LIST,
//     metadata-list and fetch requests; per point, the headline ratios:
//     synced over client-go's faster start (the lower median of its two
//     modes), bytes over a full list (client-go's LIST), the fallback over
//     client-go, checked against the recovery's targets (at 1% changed of
//     100k: ≤ 0.4×, ≤ 0.65×, ≤ 1.0×). Saved as
//     recover-changed-<N>.{json,txt} in --out.
//   - --downtimes 0,20s,60s,2m,5m,10m,30m: the time to synced against
//     downtime, boltinformer with Recovery and client-go in both modes
//     (the fallback with --variants). A downtime is emulated, not waited
//     out: at --rate Pod writes a second (default 20), a downtime d is
//     rate·d writes, made at once just before boltinformer's start as
//     changes of n·(1 − e^(−writes/n)) distinct Pods (what uniformly random
//     writes touch: a Pod written twice is one change to an informer that
//     was not watching, and a resumed watch replays that many events, not
//     the writes). Up to --window (default 75s) nothing else happens and
//     the start resumes its watch; beyond it kube-apiserver is restarted
//     before every start, as above, and boltinformer recovers. Saved as
//     recover-downtime-<N>.{json,txt,svg}; the plot spaces the downtimes
//     evenly, labelled with their values, and marks where the history
//     ends. Given both flags, the downtimes run first: a start within the
//     history resumes from the file, which an apiserver restart made
//     since boltinformer's last start would have expired.
//
// Its informers, like every child's, run without client-side throttling
// (QPS 5,000). A recovery plans its fetches to fit the client's rate limit:
// with client-go's default of 5 requests a second it would list namespaces,
// or the whole collection, where here it fetches one object per request.
//
// Each measurement runs in a child process: the binary re-executes itself
// with the hidden "child" subcommand, reads a JSON spec on stdin and answers
// with one JSON line on stdout (after a READY line when the parent is to
// drive updates). A child's stderr (informer logs) goes to a log file
// (--log-dir, temporary by default).
//
// # Caveats
//
// The apiserver, etcd, the update driver and the informer under test share
// the machine: compare ratios from one run, not absolute numbers across
// machines. With --kubeconfig the 410 variants are skipped (the apiserver
// cannot be restarted from here); the recover subcommand has no
// --kubeconfig for that reason. A restart after a 410 waits the reflector's
// backoff (0.8–1.6 s) between the failed watch and its list, as client-go's
// does; a cold start never pays it.
package main
