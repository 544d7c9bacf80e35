package widgets

// OwnerIndexCalls reports how often the OwnerField extractor ran.
func OwnerIndexCalls() int64 { return ownerIndexCalls.Load() }
