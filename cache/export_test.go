package cache

import "time"

// ReadErrorsForTest returns how many file reads of i failed.
func ReadErrorsForTest(i *Indexer) uint64 { return i.readErrors.Load() }

// ListWaitersForTest returns how many reads of inf's store wait for a list
// the store owes.
func ListWaitersForTest(inf *Informer) int64 { return inf.gate.waiters.Load() }

// SetWalkHooks sets functions called as a warm start's walk begins and as
// it starts waiting for a recovery, and returns a function restoring none.
func SetWalkHooks(starting, held func()) (restore func()) {
	walkStarting, walkHeld = starting, held
	return func() { walkStarting, walkHeld = nil, nil }
}

// WalkEndedForTest returns the channel closed when inf's warm start walk
// ends, without making a held walk go on (as a waiter does).
func WalkEndedForTest(inf *Informer) <-chan struct{} { return inf.start.delivery.done }

// SetPaceStall sets how long a handler may take no initial add before a
// bounded informer's hand-out stops waiting for it (see pacer), and returns
// a function restoring the default.
func SetPaceStall(d time.Duration) (restore func()) {
	old := paceStall
	paceStall = d
	return func() { paceStall = old }
}
