package simulation

import "math/rand"

// weakGen draws a schedule's weak server and mid-operation faults from a
// generator of its own, seeded from the seed: the steps Generate drew
// before these existed are drawn as they were, in the same order, and
// these are inserted between them.
type weakGen struct {
	rng *rand.Rand
	// noWait is the share of steps, while the informer runs, after which
	// the driver does not wait for it to settle.
	noWait float64
	// arm is the chance of a trigger before a step.
	arm float64
}

func newWeakGen(seed int64) *weakGen {
	return &weakGen{rng: rand.New(rand.NewSource(seed ^ 0x5ca1ab1e))}
}

// config chooses the server's weaknesses, the wire path and the clock.
// A nil weakGen (a base schedule) chooses none.
func (g *weakGen) config(c *Config) {
	if g == nil {
		return
	}
	r := g.rng
	c.Instances = []int{1, 1, 2, 3}[r.Intn(4)]
	c.Lag = r.Intn(2) == 0
	c.CachePages = r.Intn(2) == 0
	c.PageCap = []int{0, 0, 1, 2, 3}[r.Intn(5)]
	c.Wire = r.Intn(3) == 0
	c.Cut = c.Wire && r.Intn(2) == 0
	c.RealBackoff = r.Intn(3) == 0
	g.noWait = []float64{0, 0.2, 0.4}[r.Intn(3)]
	g.arm = []float64{0.05, 0.12, 0.25}[r.Intn(3)]
}

// before returns the steps to insert before the next one: a trigger, an
// apiserver's restart on its own, a spell without bookmarks. None of
// them waits for the informer, so that they leave it as busy as it was.
func (g *weakGen) before(c Config, up bool) []Step {
	if g == nil {
		return nil
	}
	r := g.rng
	var out []Step
	if r.Float64() < g.arm {
		out = append(out, g.trigger(c))
	}
	if c.Instances > 1 && r.Intn(30) == 0 {
		out = append(out, Step{Op: OpRestartOne, N: r.Intn(c.Instances), NoWait: true})
	}
	if up && r.Intn(40) == 0 {
		out = append(out, Step{Op: OpQuiet, N: 2 + r.Intn(8), NoWait: true})
	}
	return out
}

// beforeStart returns the steps to insert before the first start: in half
// the seeds, a trigger that strikes the cold start's list.
func (g *weakGen) beforeStart(c Config) []Step {
	if g == nil || g.rng.Intn(2) == 0 {
		return nil
	}
	kinds := []weighted[string]{{KindList, 2}, {KindCommit, 2}}
	if c.PageSize > 0 || c.PageCap > 0 {
		kinds = append(kinds, weighted[string]{KindPage, 4})
	}
	return []Step{g.triggerOf(c, kinds)}
}

// trigger returns an armed fault or write: one that fires in the middle of
// a list (a compaction or an error before a page), a recovery (a write
// before its fetches) or anything (a crash after a commit).
func (g *weakGen) trigger(c Config) Step {
	kinds := []weighted[string]{{KindList, 2}, {KindWatch, 1}, {KindCommit, 2}}
	if c.PageSize > 0 || c.PageCap > 0 {
		kinds = append(kinds, weighted[string]{KindPage, 4})
	}
	if c.Recovery {
		kinds = append(kinds, weighted[string]{KindMeta, 2}, weighted[string]{KindFetch, 3})
	}
	return g.triggerOf(c, kinds)
}

// triggerOf returns a trigger on a request of one of kinds.
func (g *weakGen) triggerOf(c Config, kinds []weighted[string]) Step {
	r := g.rng
	st := Step{Op: OpArm, Kind: pickWeighted(r, kinds), N: 1 + r.Intn(3), NoWait: true}
	if st.Kind == KindCommit {
		st.Do = ActCrash
		return st
	}
	dos := []weighted[string]{
		{ActCompact, 2}, {ActCreate, 2}, {ActUpdate, 3}, {ActDelete, 2}, {ActRestart, 1},
		{ActEndWatches, 1}, {ActError, 2}, {ActCrash, 3},
	}
	if st.Kind == KindPage {
		dos = append(dos, weighted[string]{ActCompact, 5}, weighted[string]{ActError, 2})
	}
	if c.Instances > 1 {
		dos = append(dos, weighted[string]{ActRestartOne, 1})
	}
	st.Do = pickWeighted(r, dos)
	switch st.Do {
	case ActCreate, ActUpdate, ActDelete:
		st.Key = keys[r.Intn(len(keys))]
	case ActError:
		st.Code = []int{403, 404, 429, 500}[r.Intn(4)]
	case ActRestartOne:
		st.Code = r.Intn(c.Instances)
	}
	return st
}

// mark makes s a step that does not wait, in the share noWait of the
// steps that change something while the informer runs.
func (g *weakGen) mark(s *Step, up bool) {
	if g == nil || !up || s.Op == OpStart || g.rng.Float64() >= g.noWait {
		return
	}
	s.NoWait = true
}
