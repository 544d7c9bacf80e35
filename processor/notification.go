package processor

// AddNotification tells a handler that Obj was added. IsInInitialList is true
// for objects of the initial list (or, for a warm-started informer, of the
// state loaded from disk) and for synthetic adds to a handler that joins late.
type AddNotification struct {
	Obj             interface{}
	IsInInitialList bool
}

// UpdateNotification tells a handler that Old became New.
type UpdateNotification struct {
	Old, New interface{}
	// RelistedUnchanged marks a relist's update of an object whose
	// resourceVersion the relist did not change. client-go gives these,
	// like resyncs, to the handlers due for a resync; a listener with
	// ListenerOptions.SkipRelistedUnchanged may drop them.
	RelistedUnchanged bool
}

// DeleteNotification tells a handler that Obj was deleted. Obj may be a
// cache.DeletedFinalStateUnknown.
type DeleteNotification struct {
	Obj interface{}
}

// InitialAddsDone follows the last initial add that was announced with
// Listener.AwaitInitialAdds: once the handler has handled every
// notification queued before it, the listener may report synced. It is not
// passed to the handler.
type InitialAddsDone struct{}
