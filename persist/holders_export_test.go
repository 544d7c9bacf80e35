package persist

// SetClaimWaiting makes Open call fn when it starts waiting for a DB of this
// process to finish closing the file. It returns a function restoring the
// default.
func SetClaimWaiting(fn func(path string)) (restore func()) {
	old := claimWaiting
	claimWaiting = fn
	return func() { claimWaiting = old }
}
