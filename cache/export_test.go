package cache

import "time"

// ReadErrorsForTest returns how many file reads of i failed.
func ReadErrorsForTest(i *Indexer) uint64 { return i.readErrors.Load() }

// ListWaitersForTest returns how many reads of inf's store wait for a list
// the store owes.
func ListWaitersForTest(inf *Informer) int64 { return inf.gate.waiters.Load() }

// SetPaceStall sets how long a handler may take no initial add before a
// bounded informer's hand-out stops waiting for it (see pacer), and returns
// a function restoring the default.
func SetPaceStall(d time.Duration) (restore func()) {
	old := paceStall
	paceStall = d
	return func() { paceStall = old }
}
