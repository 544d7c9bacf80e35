package recovery

import (
	"time"

	"github.com/boltinformer/boltinformer/reflector"
)

// Stats describes one recovery.
type Stats struct {
	// Listed is the number of items of the metadata list, and Pages the
	// number of its pages.
	Listed, Pages int
	// Unchanged, Deleted and Fetch classify the stored and listed keys.
	// Unchanged keys are current, and Deleted ones gone or replaced by
	// another UID. Fetch keys are new, changed or replaced. Ahead are stored
	// objects newer than the list, listed or not. An earlier recovery that
	// did not finish left them, and they are kept until the watch passes
	// them.
	Unchanged, Deleted, Fetch, Ahead int
	// Requests is the number of fetch requests, each of one object or of
	// the whole collection. Fetched counts the objects they returned that
	// were applied. Skipped counts the fetched objects and watch events
	// dropped because the store already held their key at that
	// resourceVersion or a newer one.
	Requests, Fetched, Skipped int
	// Decoded counts the objects decoded from the responses of the
	// recovery's list and fetches. It counts those fetched. Of a list read
	// from its protobuf, it counts the items decoded alone, the ones to
	// fetch. Of a list decoded whole, it counts all the items.
	Decoded int
	// FullList says the recovery's list was of whole objects, not of
	// metadata. The metadata list could not be made or compared (see
	// Lister.ListObjectsWire). The changed objects came from the full list,
	// decoded alone, and Fetched counts those applied.
	FullList bool
	// Duration is the time from the metadata list to the store's
	// consistency. ListDuration is the part of it until the list was made
	// and its diff applied. The fetches and the watch take the rest.
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
