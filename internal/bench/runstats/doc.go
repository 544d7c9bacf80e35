// Package runstats reads what the benchmarks measure of a process — its CPU
// time and the memory figures of /proc/<pid>/status — and summarises
// repeated runs by their median.
//
// # Basics
//
// CPU and Status read another process's counters from /proc, so that the
// process measured does nothing to be measured; SelfCPU is this process's
// own CPU time (getrusage). Median is the median of a set of runs.
//
// Every function is safe to call concurrently; none keeps state.
//
// # Caveats
//
// /proc exists only on Linux: elsewhere CPU reports ok == false and Status
// an error, and SelfCPU reads 0 where getrusage is missing (not unix).
// CPU counts in USER_HZ ticks (10 ms), so a difference of two readings is
// exact to ±0.01 s.
package runstats
