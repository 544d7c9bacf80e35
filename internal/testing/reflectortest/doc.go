// Package reflectortest holds the fakes that reflector's and recovery's
// tests drive a Reflector with. They are a recording Store, a scripted
// ListerWatcher, a recording Observer and error handler, and small pods.
//
// # Basics
//
// RecordingStore implements reflector.Store and records each write as a
// string, such as "add a@5", "replace 2@10" or "bookmark@7". It tracks each
// object's resourceVersion by name, as a store after those writes holds it.
//
// ScriptedLW answers List and Watch with the test's functions and records
// every request in order. It keeps each fake watcher it hands out by call
// index, for the test to send that watch's events.
//
// RecordingObserver implements reflector.Observer and ErrorRecorder its
// WatchErrorHandler. Run starts a Reflector's Run and stops it at cleanup.
//
// # Caveats
//
// This package must not import reflector: reflector's own tests are an
// internal test package, so that import would be a cycle. That is why
// RecordingObserver takes the StartCause type as a type parameter, and why
// each test package still builds its own Reflector.
//
// Every method of a fake is safe for concurrent use. The functions a test
// scripts run on the reflector's goroutines, without a lock of the fake.
package reflectortest
