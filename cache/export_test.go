package cache

// ReadErrorsForTest returns how many file reads of i failed.
func ReadErrorsForTest(i *Indexer) uint64 { return i.readErrors.Load() }
