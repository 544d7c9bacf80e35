// Package manager builds the controller-runtime managers the benches start:
// one per start, on controller-runtime's default cache or on boltcr's.
//
// # Basics
//
// New returns a manager and the counter of its Pod requests. A manager is
// not safe to start twice; build one per start.
package manager
