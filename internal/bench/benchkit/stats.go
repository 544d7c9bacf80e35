package benchkit

import "github.com/boltinformer/boltinformer/internal/bench/runstats"

// MedianOf is the median of f over runs (runstats.Median), 0 for none.
func MedianOf[T any](runs []T, f func(T) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return runstats.Median(xs)
}

// GroupBy splits runs by key, the keys in the order they first appear.
func GroupBy[T any, K comparable](runs []T, key func(T) K) (order []K, by map[K][]T) {
	by = map[K][]T{}
	for _, r := range runs {
		k := key(r)
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	return order, by
}
