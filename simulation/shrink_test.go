package simulation

import (
	"slices"
	"time"
)

// Shrink returns the shortest schedule it finds, within budget, that still
// fails with the same category as fail: greedy delta debugging, removing
// chunks of steps (halves, then quarters, ... then single steps) and keeping
// each removal after which the run still fails so. Runs are not perfectly
// reproducible (the informer's goroutines interleave as they will), so a
// removal is kept only if its run fails; a flaky failure shrinks less, never
// wrongly. run executes a schedule and returns its failure.
func Shrink(sched Schedule, fail *Failure, budget time.Duration, run func(Schedule) *Failure) (Schedule, *Failure, int) {
	deadline := time.Now().Add(budget)
	category := fail.Category()
	best, bestFail := sched, fail
	// Steps after the failing one never matter.
	if fail.Step >= 0 && fail.Step+1 < len(best.Steps) {
		best.Steps = slices.Clone(best.Steps[:fail.Step+1])
	}
	runs := 0
	for chunk := len(best.Steps) / 2; chunk >= 1; chunk /= 2 {
		for start := 0; start < len(best.Steps); {
			if time.Now().After(deadline) {
				return best, bestFail, runs
			}
			end := min(start+chunk, len(best.Steps))
			try := best
			try.Steps = slices.Concat(best.Steps[:start], best.Steps[end:])
			runs++
			if f := run(try); f != nil && f.Category() == category {
				best, bestFail = try, f
				if f.Step >= 0 && f.Step+1 < len(best.Steps) {
					best.Steps = slices.Clone(best.Steps[:f.Step+1])
				}
				continue // the same start now names the next chunk
			}
			start = end
		}
	}
	return best, bestFail, runs
}
