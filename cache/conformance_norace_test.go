//go:build !race

package cache_test

// confRaceEnabled is true under -race, where the conformance tests run
// shorter streams and fewer seeds at once.
const confRaceEnabled = false
