// Package bench measures boltinformer side by side with client-go in the same
// run. Every benchmark has a client-go and a boltinformer variant under one
// name (BenchmarkX/client-go, BenchmarkX/boltinformer...), so `make bench`
// can print their ratio.
//
// # Basics
//
// The Go benchmarks in this package cover the storage layer: Get, List and
// ByIndex hot and cold, apply throughput through group commit, and heap
// after loading N objects. They use realistic Pods (internal/fixture) and a
// cache file in a temporary directory with fsync on, as in production.
//
// # Caveats
//
// Numbers depend on the machine and its disk; compare ratios from one run,
// not absolute times across machines.
package bench
