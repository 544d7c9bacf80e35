// Package bench measures boltinformer beside client-go in the same run.
// Every benchmark has a client-go and a boltinformer variant under one name
// (BenchmarkX/client-go, BenchmarkX/boltinformer...). So `make bench` can
// print their ratio.
//
// # Basics
//
// The Go benchmarks here cover the storage layer. They time Get, List and
// ByIndex, hot and cold, and apply throughput through group commit. They
// measure the heap after loading N objects, and the heap of a bounded
// collection opened with a journal (BenchmarkOpenHeap). Without a server,
// they time an informer's start and the drain of a watch stream.
// BenchmarkWatch reports CPU and bytes allocated per update, bytes
// allocated per cold-start object, and the delivered and committed rates. BenchmarkRandomUpdates measures what scattered updates
// cost the file at each page size. The benchmarks use realistic Pods
// (internal/testing/fixture) and a cache file in a temporary directory,
// with fsync on as in production.
//
// bench/cmd/informerbench compares whole informers (make bench-informer;
// make demo is its short form). It runs each informer in its own process
// against a real kube-apiserver with 10k–100k Pods. It measures client-go's
// cold sync in protobuf, with watch-list and LIST. Beside it, it measures
// boltinformer's cold start, warm restart, bounded-memory restart and
// restart after a 410, and the file's size, and checks them against the
// project's targets. Results go to _output/bench/ (summaries worth keeping
// to bench/results/), and the write-up to docs/benchmarks.md.
//
// # Caveats
//
// Numbers depend on the machine and its disk. Compare ratios from one run,
// not absolute times across machines.
//
// # Module
//
// bench is a Go module of its own, so the harness's dependencies never
// enter the library's go.mod. Its go.mod replaces the library with this
// checkout. Run its commands from bench/ (go -C bench run ./cmd/...).
package bench
