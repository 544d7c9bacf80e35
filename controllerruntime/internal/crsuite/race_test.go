//go:build race

package crsuite_test

// raceEnabled: the suite is built with -race when this test is.
const raceEnabled = true
