package persist

// WithClaimWaiting returns opts with Open calling fn when it starts waiting
// for a DB of this process to finish closing the file.
func WithClaimWaiting(opts Options, fn func(path string)) Options {
	opts.claimWaiting = fn
	return opts
}
