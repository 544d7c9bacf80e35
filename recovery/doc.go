// Package recovery replaces a reflector's relist by one that transfers and
// decodes only what changed. It serves a relist after a 410, or one for a
// list the store owes. The store already holds the previous state, and every
// object's UID and resourceVersion.
// docs/recovery.md walks one 410 through the code, hop by hop.
//
// # Basics
//
// New returns a Relister, a reflector.Relister, for a Store and the
// user's Options. Each relist is a recovery:
//
//  1. List the collection's metadata only (PartialObjectMetadataList,
//     paged) at the last resourceVersion with NotOlderThan, or at "" where
//     that is unavailable. Never at "0", which a lagging watch cache serves.
//  2. Diff UIDs and resourceVersions against the store, in order with every
//     write before it (Store.Begin). The store marks itself
//     must-list first, so a crash from here on recovers again. It deletes
//     objects gone or replaced by another UID, and leaves unchanged ones.
//     A stored object newer than the list is kept, listed or not. An
//     unfinished recovery's fetch leaves such an object behind. A lagging
//     apiserver may serve the list, and the watch brings the object's later
//     changes, its deletion too.
//  3. Watch from the list's resourceVersion. Once the watch is open, fetch
//     the new and changed objects: one per request, or the collection
//     where a quarter changed (fetch.go).
//  4. Once every changed object is fetched (or its deletion seen on the
//     watch) and the watch has passed every fetched resourceVersion, the
//     store holds the collection at the watch's resourceVersion. The
//     recovery ends with Store.End there.
//
// Every write a recovery makes reaches the store on the reflector's
// goroutine, under one forward rule (forward.go). An object not newer
// than its key's last state is dropped, so no handler sees a
// resourceVersion go backwards. One with another UID follows a
// cache.DeletedFinalStateUnknown of the key's last state.
//
// resourceVersions are compared as integers, since a Lister vouches that
// they are etcd revisions. The metadata list may not be made, or its
// versions may not be integers. Then a full list through
// Lister.ListObjectsWire serves as the list and the fetches (fulllist.go).
// Only its changed items are decoded. Without ListObjectsWire, the reflector
// lists in full (reflector.ErrFullList).
// Options.ListInFull makes every recovery such a full list.
// Options.OpaqueVersions tells versions only equal or not.
//
// The tuning is constants, each naming the measurement that set it. It
// covers when to list the collection, page sizes and a rate-limited
// client's request budget. Options.Tuning overrides the fractions that
// choose a full list, the request budget and the page asked ahead. Its zero
// value keeps every default.
//
// # Goroutines and locks
//
// The reflector's goroutine makes every store write, as client-go's watch
// loop does. It lists, has the store apply the diff, and starts the
// recovery. Then the recovery is the watch's Store (reflector.Relisted), so
// watch events reach the forward rule on that goroutine. Fetch goroutines
// send their results over the Relisted's Writes channel, which the watch
// loop selects on beside the watch. The rule's per-key map is therefore
// owned by one goroutine and needs no lock.
//
// One fetch goroutine per recovery waits for the watch to open and runs up
// to Options.Workers request goroutines. A metadata list asks for its next
// page on one goroutine while it reads a page (pageAhead). Fetch
// goroutines share only atomics with the reflector's goroutine. These are
// the keys resolved, the counts and the first error. Relisted.Finish
// cancels and joins them all, so nothing outlives ListAndWatch.
//
// Callbacks (the error handler, Hooks.Started's end,
// Observer.Recovered) run on the reflector's goroutine with no lock
// held. Like the reflector's Observer, they must return quickly.
//
// # Caveats
//
// A metadata list is not free. Every object's metadata includes its
// managedFields, so it reads more than half of a full list's bytes
// (docs/warmstart.md). What it saves is decoding, storing and delivering the
// unchanged objects. Fetches go through the lister's client and its rate
// limiter.
package recovery
