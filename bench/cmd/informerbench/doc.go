// Command informerbench measures boltinformer side by side with client-go
// v0.37.2's informer against a real kube-apiserver, each informer in its own
// process so that RSS is honest. docs/benchmarks.md describes every figure.
//
// # Basics
//
//	informerbench [flags]          populate Pods, measure every variant, save the results
//	informerbench demo [flags]     a short cold start / warm restart demonstration (make demo)
//	informerbench churn [flags]    steady state under a churn of changes, both informers side by side
//	informerbench steady [flags]   the churn at several sizes, uniform and skewed, then one table against the targets (make bench-steady)
//	informerbench recover [flags]  restarts after a downtime longer than the watch history
//
// It starts etcd and kube-apiserver on loopback
// (internal/testing/apiservertest; make test-binaries builds them). It
// creates the Pods unless they exist, warms the watch cache up (unmeasured), and
// runs every variant --reps times in rotated order, reporting medians.
// A heartbeat renews one Lease every 200 ms throughout, as a live cluster's
// Leases do: a warm start synced when caught up needs etcd to move.
//
// Each measurement runs in a child: the binary re-executes itself with the
// hidden "child" (or "churn-child") subcommand, reads a JSON spec on stdin
// and answers with JSON lines on stdout. A child's stderr goes to a log
// file in the work directory; a failing child's log tail is printed.
//
// Results go to --out (default _output/bench/…): one JSON file per run with
// its raw measurements and its report, rendered beside it as text and SVG.
// bench/cmd/benchreport renders a saved file again.
//
// # Caveats
//
// The apiserver, etcd, the update driver and the informer under test share
// the machine: compare ratios from one run, not absolute numbers across
// machines. Memory is private memory
// (RssAnon), then VmRSS, which also counts mapped pages of the cache file.
package main
