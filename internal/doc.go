// Package internal holds only this comment and a test of its layout. Its
// folders sort the module's private packages by who imports them, so that
// a package's path says whether it ships.
//
// # Basics
//
//   - internal/<name> ships: library packages import clusterid, format,
//     listidentity and wire, so they enter every user's build.
//   - internal/testing/<name> is test support: apiservertest, fixture,
//     listidentitytest, listrules, metrictest, poll and reflectortest. Only
//     tests, benchmarks and other support code import them.
//   - internal/bench/<name> is benchmark support: benchkit and runstats.
//     Only the benchmark harnesses and Go benchmarks import them.
//
// The randomized simulation (simulation/) and the end-to-end tests (e2e/)
// sit at the root, beside the packages they drive. They hold only
// _test.go files and a doc.go, so nothing can import them.
//
// Imports point down, never back up. What ships imports neither test nor
// benchmark support outside its _test.go files. Test support may import
// what ships, never benchmark support. Benchmark support may import both.
// layout_test.go checks these rules on every Go file of the root module.
//
// # Caveats
//
// A package used by library code only from _test.go files is test support,
// not shipping. Go's internal rule lets every module of this repository
// import these packages: controllerruntime and components reach them
// through replace directives, so a move must update their imports too.
package internal
