// Package bench measures boltinformer side by side with client-go in the same
// run. Every benchmark has a client-go and a boltinformer variant under one
// name (BenchmarkX/client-go, BenchmarkX/boltinformer...), so `make bench`
// can print their ratio.
//
// # Basics
//
// The Go benchmarks in this package cover the storage layer: Get, List and
// ByIndex hot and cold, apply throughput through group commit, heap
// after loading N objects, and the heap a bounded collection holds once
// opened with a journal (BenchmarkOpenHeap); and, without a server, an informer's start and
// the drain of a watch stream (CPU per update, delivered and committed
// rates; BenchmarkWatch), and what scattered updates cost the file at each
// page size (BenchmarkRandomUpdates). They use realistic Pods (internal/fixture) and a
// cache file in a temporary directory with fsync on, as in production.
//
// The whole informers are compared by bench/cmd/informerbench (make
// bench-informer; make demo is its short form): against a real
// kube-apiserver with 10k–100k Pods, each informer in its own process, it
// measures client-go's cold sync (JSON and protobuf, watch-list and LIST)
// beside boltinformer's cold start, warm restart, bounded-memory restart and
// restart after a 410, plus watch throughput, indexer latency and file size,
// and checks them against the project's targets. Results go to
// bench/results/, the sync-time plot to docs/sync-time.svg, the write-up to
// docs/benchmarks.md.
//
// # Caveats
//
// Numbers depend on the machine and its disk; compare ratios from one run,
// not absolute times across machines.
package bench
