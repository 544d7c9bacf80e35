package main

// Ratios derived from one run: each informer start's stages over client-go
// in boltinformer's wire format (like for like).
// They are saved with the results (JSON: ratios; CSV: rows whose metric
// ends in _x_<reference>), beside the medians they come from.

// ratioDef is one derived ratio of a variant: metric over refMetric of
// refVariant.
type ratioDef struct {
	name, metric, refVariant, refMetric string
}

// likeForLike returns client-go's mode in boltinformer's wire format with
// the lower median sync time (the reference of every "× client-go"), or ""
// if neither ran.
func (r *sizeResult) likeForLike() string {
	_, from, _ := bestClientGo(r.Medians, r.BoltContentType, mSync)
	return from
}

// ratioDefs returns the ratios reported for variant.
func (r *sizeResult) ratioDefs(variant string) []ratioDef {
	var defs []ratioDef
	if ref := r.likeForLike(); ref != "" && variant != ref {
		for _, m := range []string{mInformerSynced, mFirstList, mSync} {
			defs = append(defs, ratioDef{m + "_x_" + ref, m, ref, m})
		}
	}
	return defs
}

// ratioOf is a/b, and whether both were measured.
func ratioOf(a, b float64, okA, okB bool) (float64, bool) {
	if !okA || !okB || a <= 0 || b <= 0 {
		return 0, false
	}
	return a / b, true
}

// computeRatios returns every variant's ratios of medians.
func (r *sizeResult) computeRatios() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for v, m := range r.Medians {
		for _, d := range r.ratioDefs(v) {
			a, okA := m[d.metric]
			b, okB := r.Medians[d.refVariant][d.refMetric]
			if x, ok := ratioOf(a, b, okA, okB); ok {
				if out[v] == nil {
					out[v] = map[string]float64{}
				}
				out[v][d.name] = x
			}
		}
	}
	return out
}
