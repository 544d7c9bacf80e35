package benchkit

import "github.com/boltinformer/boltinformer/internal/runstats"

// MedianOf is the median of f over runs (runstats.Median), 0 for none.
func MedianOf[T any](runs []T, f func(T) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return runstats.Median(xs)
}
