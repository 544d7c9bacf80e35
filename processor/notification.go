package processor

// AddNotification tells a handler that Obj was added. IsInInitialList is true
// for objects of the initial list. For a warm-started informer, the state
// loaded from disk is the initial list. Synthetic adds to a handler that
// joins late are initial too.
type AddNotification struct {
	Obj             interface{}
	IsInInitialList bool
}

// UpdateNotification tells a handler that Old became New.
type UpdateNotification struct {
	Old, New interface{}
	// RelistedUnchanged marks a relist's update of an object whose
	// resourceVersion the relist did not change. client-go gives these,
	// like resyncs, to the handlers due for a resync. A listener with
	// ListenerOptions.SkipRelistedUnchanged may drop them.
	RelistedUnchanged bool
}

// DeleteNotification tells a handler that Obj was deleted. Obj may be a
// cache.DeletedFinalStateUnknown.
type DeleteNotification struct {
	Obj interface{}
}

// InitialAddsDone follows the last initial add announced with
// Listener.AwaitInitialAdds. Once the handler has handled every
// notification queued before it, the listener may report synced. It is not
// passed to the handler.
type InitialAddsDone struct{}
