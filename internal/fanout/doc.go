// Package fanout runs a function over many indexes on a bounded number of
// goroutines, stopping at the first error.
//
// # Basics
//
// Each(ctx, n, workers, fn) calls fn(ctx, i) for i in [0, n), at most
// workers calls at a time, and returns once every call it started has
// returned. The first call to fail cancels the context the others see, no
// new call starts, and Each returns that error.
//
// # Caveats
//
// Calls run in no particular order and may overlap: fn must be safe to
// call concurrently. Each starts and stops its own goroutines; none outlives
// it.
package fanout
