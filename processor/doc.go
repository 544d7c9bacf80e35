// Package processor fans informer notifications out to event handlers. It is
// ported from client-go v0.37.2's sharedProcessor and processorListener
// (tools/cache/shared_informer.go). client-go keeps those types unexported,
// and a drop-in informer must deliver exactly what client-go's delivers.
//
// # Basics
//
// A Processor holds Listeners, one per registered handler. Distribute sends
// a notification to every listener. A resync notification goes only to the
// listeners that ShouldResync last selected.
//
// Each Listener runs three goroutines. pop moves notifications from an
// unbuffered add channel into an unbounded ring buffer, and on to run. run
// calls the handler with one notification at a time, in order. watchSynced
// waits for the informer to sync. It then lets the listener's HasSynced turn
// true once the handler has handled every initial-list add it was given.
//
// A listener's resync period is the requested one, rounded up to the
// processor's resync check period (DetermineResyncPeriod). ShouldResync marks
// the listeners that are due and schedules their next resync.
//
// # Caveats
//
// As in client-go, a listener's buffer is unbounded. A stalled handler's
// backlog grows. Listener.Pending reports the backlog, and boltinformer
// exports it as a metric.
//
// A panicking handler is handled as client-go handles it, by
// utilruntime.HandleCrash, which re-panics by default. If panics are
// configured not to crash, the notification is skipped and the listener
// pauses for one second.
//
// A Processor runs once. After Run returns, its listeners are closed and it
// cannot be reused.
package processor
