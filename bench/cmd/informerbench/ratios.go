package main

// Ratios derived from one run: each informer start's stages over client-go
// in boltinformer's wire format (like for like).
// They are saved with the results (JSON: ratios), beside the medians they
// come from.

// likeForLike returns client-go's mode in boltinformer's wire format with
// the lower median sync time (the reference of every "× client-go"), or ""
// if neither ran.
func (r *sizeResult) likeForLike() string {
	_, from, _ := bestClientGo(r.Medians, mSync)
	return from
}

// ratioOf is a/b, and whether both were measured.
func ratioOf(a, b float64, okA, okB bool) (float64, bool) {
	if !okA || !okB || a <= 0 || b <= 0 {
		return 0, false
	}
	return a / b, true
}

// computeRatios returns every variant's ratios of medians: each start
// stage over the like-for-like reference's, named <metric>_x_<reference>.
func (r *sizeResult) computeRatios() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	ref := r.likeForLike()
	for v, m := range r.Medians {
		if ref == "" || v == ref {
			continue
		}
		for _, metric := range []string{mInformerSynced, mFirstList, mSync} {
			a, okA := m[metric]
			b, okB := r.Medians[ref][metric]
			if x, ok := ratioOf(a, b, okA, okB); ok {
				if out[v] == nil {
					out[v] = map[string]float64{}
				}
				out[v][metric+"_x_"+ref] = x
			}
		}
	}
	return out
}
