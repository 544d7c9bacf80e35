package simulation

import "math/rand"

// interleave adds to a schedule what meets an operation halfway on
// purpose, not by chance: a start that does not wait to be synced; a
// request the apiserver answers slowly (a hold, faults_test.go) while the next
// steps run — a stop, a crash, a 410, a write, an acknowledgement, a
// restart inside the process; handovers (a new informer on the open file)
// and calls on what the user kept of the old one; a checkpoint's handler
// that acknowledges in place; and cut bodies that end at a field's
// boundary, as a connection dropped between two writes of a streamed list
// ends them. It draws from a generator of its own, so a seed's base,
// weak and enriched steps stay what they were, in order: it only inserts
// steps and marks some as not waiting.
func interleave(s *Schedule) {
	rng := rand.New(rand.NewSource(s.Seed*15485863 + 32452843))
	c := &s.Config
	c.AckInHandler = c.Checkpoint && rng.Intn(2) == 0
	c.FieldCuts = c.Cut && rng.Intn(2) == 0
	c.Handover = rng.Intn(3) == 0
	c.SlowCache = c.Lag && rng.Intn(4) != 0
	if c.SlowCache && c.Instances == 1 {
		// A pair: the apiserver and a slow one behind the same address.
		c.Instances = 2
	}
	// share is the chance that a start, or an operation of the running
	// informer, is cut halfway.
	share := []float64{0.1, 0.2, 0.3}[rng.Intn(3)]

	var out []Step
	up, handed := false, false
	for _, st := range s.Steps {
		switch {
		case st.Op == OpStart && !up && rng.Float64() < 2*share:
			out = append(out, cutStart(rng, *c, st)...)
			up = true
			continue
		case up && cuttable(st.Op) && rng.Float64() < share:
			steps := cutOperation(rng, *c, st)
			out = append(out, steps...)
			handed = handed || steps[len(steps)-1].Op == OpHandover
			continue
		case up && c.Instances > 1 && rng.Float64() < share/2:
			// One apiserver restarts alone: a 410 for the watches it
			// served, while the others' caches may lag.
			steps := cutOperation(rng, *c, Step{Op: OpRestartOne, N: rng.Intn(c.Instances)})
			out = append(out, steps...)
			handed = handed || steps[len(steps)-1].Op == OpHandover
		}
		out = append(out, st)
		switch st.Op {
		case OpStart:
			up = true
		case OpStop, OpCrash:
			up = false
		}
		if up && c.Handover && rng.Intn(15) == 0 {
			out = append(out, Step{Op: OpHandover, N: rng.Intn(2)})
			handed = true
		}
		if handed && rng.Intn(5) == 0 {
			out = append(out, Step{Op: OpStale})
		}
	}
	s.Steps = out
}

// cuttable says whether an operation that op starts may be cut halfway:
// a 410's recovery or relist, a watch's restart, a change's delivery.
func cuttable(op Op) bool {
	switch op {
	case OpRestart, OpRestartOne, OpCompact, OpEndWatches, OpInject, OpCreate, OpUpdate, OpDelete, OpRecreate:
		return true
	}
	return false
}

// cutStart returns start, which does not wait, with the steps that meet it
// halfway: maybe a request held, maybe an acknowledgement of what the
// checkpoint's handler was given so far, and then maybe a stop or a crash
// and a start that waits.
func cutStart(rng *rand.Rand, c Config, start Step) []Step {
	var out []Step
	if rng.Intn(2) == 0 {
		// While the process is down: changes the start must catch up
		// with, and maybe an apiserver that restarts alone (a 410 for a
		// watch it serves, while the others' caches lag).
		out = append(out, writes(rng)...)
		if c.Instances > 1 && rng.Intn(2) == 0 {
			out = append(out, Step{Op: OpRestartOne, N: rng.Intn(c.Instances)})
		}
	}
	if rng.Intn(3) != 0 {
		out = append(out, hold(rng, c, true))
	}
	start.NoWait = true
	out = append(out, start)
	if c.Checkpoint && rng.Intn(2) == 0 {
		out = append(out, Step{Op: OpAck, P: 1, NoWait: true})
	}
	switch pickWeighted(rng, []weighted[Op]{{OpStop, 3}, {OpCrash, 3}, {"", 2}}) {
	case OpStop:
		out = append(out, Step{Op: OpStop}, Step{Op: OpStart})
	case OpCrash:
		out = append(out, Step{Op: OpCrash}, Step{Op: OpStart})
	}
	return out
}

// cutOperation returns op, which does not wait, with a request held maybe,
// writes before it and during it maybe (the work of the recovery or relist
// a 410 starts, and changes it meets), and the steps that meet it halfway:
// a stop or a crash and a start, a 410 (every apiserver restarts, or one
// does), the watches' end, a handover, or nothing but the next step.
func cutOperation(rng *rand.Rand, c Config, op Step) []Step {
	out := writes(rng)
	if rng.Intn(4) != 0 {
		out = append(out, hold(rng, c, false))
	}
	op.NoWait = true
	out = append(out, op)
	out = append(out, writes(rng)...)
	cuts := []weighted[Op]{{OpStop, 3}, {OpCrash, 3}, {OpRestart, 2}, {OpEndWatches, 2}, {"", 1}}
	if c.Instances > 1 {
		cuts = append(cuts, weighted[Op]{OpRestartOne, 4})
	}
	if c.Handover {
		cuts = append(cuts, weighted[Op]{OpHandover, 2})
	}
	switch cut := pickWeighted(rng, cuts); cut {
	case OpStop, OpCrash:
		out = append(out, Step{Op: cut}, Step{Op: OpStart})
	case OpRestart:
		out = append(out, Step{Op: OpRestart, N: 1})
	case OpRestartOne:
		out = append(out, Step{Op: OpRestartOne, N: rng.Intn(c.Instances)})
	case OpEndWatches:
		out = append(out, Step{Op: OpEndWatches})
	case OpHandover:
		out = append(out, Step{Op: OpHandover, N: rng.Intn(2)})
	}
	return out
}

// writes returns up to three writes that do not wait, creations mostly:
// a recovery's work, fetched in key order, not in the order written.
func writes(rng *rand.Rand) []Step {
	var out []Step
	for range rng.Intn(4) {
		op := []Op{OpCreate, OpCreate, OpUpdate, OpDelete}[rng.Intn(4)]
		out = append(out, Step{Op: op, Key: keys[rng.Intn(len(keys))], NoWait: true})
	}
	return out
}

// hold returns a step that arms a hold of a request a start (starting) or
// a running informer's operation makes.
func hold(rng *rand.Rand, c Config, starting bool) Step {
	kinds := []weighted[string]{{KindList, 2}, {KindWatch, 1}}
	if c.PageSize > 0 || c.PageCap > 0 {
		kinds = append(kinds, weighted[string]{KindPage, 4})
	}
	if c.Recovery {
		kinds = append(kinds, weighted[string]{KindMeta, 2}, weighted[string]{KindFetch, 4})
	}
	if starting && c.PageSize > 0 {
		kinds = append(kinds, weighted[string]{KindPage, 4})
	}
	st := Step{Op: OpArm, Kind: pickWeighted(rng, kinds), N: 1 + rng.Intn(3), Do: ActHold, NoWait: true}
	if st.Kind == KindFetch || st.Kind == KindPage {
		// After the first: the recovery or the list has made progress.
		st.N = 2 + rng.Intn(3)
	}
	return st
}
