// Package processor fans informer notifications out to event handlers with
// the semantics of client-go v0.37.2's sharedProcessor and
// processorListener (tools/cache/shared_informer.go), from which it is
// ported: client-go keeps those types unexported, and a drop-in informer
// must deliver exactly what client-go's delivers.
//
// # Basics
//
// A Processor holds Listeners, one per registered handler. Distribute sends
// a notification (AddNotification, UpdateNotification, DeleteNotification)
// to every listener, or, for a resync notification, only to the listeners
// that ShouldResync last selected. Each Listener runs three goroutines: pop
// moves notifications from an unbuffered add channel into an unbounded ring
// buffer and on to run, which calls the handler, one notification at a
// time, in order; watchSynced waits for the informer to sync and then lets
// the listener's HasSynced become true once every initial-list add it was
// given has been handled.
//
// A listener's resync period is the requested one rounded up to the
// processor's resync check period (DetermineResyncPeriod); ShouldResync marks
// which listeners are due and schedules their next resync.
//
// # Caveats
//
// Like client-go, a listener's buffer is unbounded: a handler that stalls
// makes its backlog grow. Listener.Pending reports the backlog so it can be
// watched (boltinformer exports it as a metric).
//
// A panicking handler is handled as client-go does: utilruntime.HandleCrash
// (which re-panics by default); if panics are configured not to crash, the
// offending notification is skipped and the listener pauses one second.
//
// A Processor runs once; after Run returns its listeners are closed and it
// cannot be reused.
package processor
