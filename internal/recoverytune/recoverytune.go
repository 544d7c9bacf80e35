package recoverytune

// Tuning overrides a recovery's tuning constants. Zero fields keep them.
type Tuning struct {
	// FullListFraction changed lists the collection; above 1: never.
	FullListFraction float64
	// FirstPageFraction of a metadata list's first page changed lists in
	// full; above 1: never.
	FirstPageFraction float64
	// MaxFetchRequests bounds a recovery's fetch requests; negative: no
	// bound; zero: derived from the lister's rate limit.
	MaxFetchRequests int
	// NoPageAhead asks for no metadata page before the one read ends.
	NoPageAhead bool
}

// Tuned is a recovery's Lister that sets its tuning.
type Tuned interface {
	RecoveryTuning() Tuning
}
