package recovery

import (
	"time"

	"github.com/boltinformer/boltinformer/reflector"
)

// Stats describes one recovery.
type Stats struct {
	// Listed is the number of items of the metadata list, Pages its pages.
	Listed, Pages int
	// Unchanged, Deleted and Fetch classify the stored and listed keys:
	// unchanged; gone or replaced by another UID; new, changed or replaced.
	// Ahead are stored objects newer than the list, listed or not (left by
	// an earlier recovery that did not finish), kept until the watch passes them.
	Unchanged, Deleted, Fetch, Ahead int
	// Requests is the number of fetch requests (one object, or the whole
	// collection); Fetched the objects they returned that were applied;
	// Skipped the fetched objects and watch events dropped because the
	// store already held their key at that resourceVersion or a newer one.
	Requests, Fetched, Skipped int
	// Decoded counts the objects decoded from the responses of the
	// recovery's list and fetches: those fetched, and of a list, those read
	// alone from its protobuf (the ones to fetch) or, for a list decoded
	// whole, all its items.
	Decoded int
	// FullList says the recovery's list was of whole objects, not of
	// metadata (the metadata list could not be made or compared; see
	// Lister.ListObjectsWire): the changed objects came from it, decoded alone, and
	// Fetched counts those applied.
	FullList bool
	// Duration is the time from the metadata list to the store's
	// consistency; ListDuration the part of it until the list was made
	// and its diff applied (the fetches and the watch take the rest).
	Duration, ListDuration time.Duration
}

// Observer is a reflector.Observer that also hears of recoveries. A
// recovery's metadata list is reported through Listed (items and pages of
// the metadata list) once the store has applied its diff.
type Observer interface {
	reflector.Observer
	// Recovered is called once a recovery has made the store consistent at
	// resourceVersion, on the reflector's goroutine.
	Recovered(cause reflector.StartCause, resourceVersion string, stats Stats)
}
