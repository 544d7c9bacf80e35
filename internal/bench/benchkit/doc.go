// Package benchkit holds what the three benchmark harnesses share:
// bench/cmd/informerbench, controllerruntime/bench and components/bench.
//
// # Basics
//
// One concept per file. requests.go counts an informer's requests by kind
// on the wire; apiserver.go restarts kube-apiserver and waits for its watch
// cache; pods.go creates the Pods a bench measures; proc.go reads /proc;
// profile.go writes CPU profiles; child.go runs child processes
// with their logs; order.go rotates variants between repetitions;
// flags.go has the flags every harness takes; report.go and plot.go turn
// a harness's JSON into text tables and SVG; stats.go groups runs and
// takes their medians with internal/bench/runstats.
//
// A harness emits one JSON file per run (Result): its raw measurements and
// a Report built from them. bench/cmd/benchreport renders any such file again.
//
// # Caveats
//
// /proc readers work on Linux only. Requests is safe for concurrent use;
// a Report is built by one goroutine. Save writes every file anew.
package benchkit
