package cache

// ReadErrorsForTest returns how many file reads of i failed.
func ReadErrorsForTest(i *Indexer) uint64 { return i.readErrors.Load() }

// ListWaitersForTest returns how many reads of inf's store wait for a list
// the store owes.
func ListWaitersForTest(inf *Informer) int64 { return inf.gate.waiters.Load() }
