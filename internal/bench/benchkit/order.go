package benchkit

// Rotate returns variants in the order repetition rep runs them: rotated
// by rep, so that no variant always runs first after a quiet apiserver or
// right after another. With two variants it alternates.
func Rotate[T any](variants []T, rep int) []T {
	n := len(variants)
	out := make([]T, n)
	for i := range variants {
		out[i] = variants[(i+rep)%n]
	}
	return out
}
