package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestChurnSkewFlag(t *testing.T) {
	var s churnSkew
	if s.String() != "uniform" || s.dirSuffix() != "" {
		t.Errorf("zero value %q (suffix %q), want uniform (no suffix)", s.String(), s.dirSuffix())
	}
	if err := s.Set("zipf:1.1"); err != nil || s.zipfS != 1.1 || s.String() != "zipf:1.1" || s.dirSuffix() != "-zipf1.1" {
		t.Errorf("Set(zipf:1.1) = %v (suffix %q), %v", s, s.dirSuffix(), err)
	}
	for _, bad := range []string{"", "zipf", "zipf:", "zipf:1", "zipf:0.9", "zipf:-2", "zipf:x", "zipf:inf", "zipf:NaN", "Zipf:1.1", "normal"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
	if s.zipfS != 1.1 {
		t.Errorf("a rejected Set changed the skew to %v", &s)
	}
	if err := s.Set("uniform"); err != nil || s != (churnSkew{}) {
		t.Errorf("Set(uniform) = %v, %v", s, err)
	}
}

func TestParseSkews(t *testing.T) {
	got, err := parseSkews(" uniform,zipf:1.1,zipf:1.10 ")
	if err != nil || len(got) != 2 || got[0] != (churnSkew{}) || got[1] != (churnSkew{zipfS: 1.1}) {
		t.Errorf("parseSkews = %v, %v; want [uniform zipf:1.1]", got, err)
	}
	for _, bad := range []string{"", "uniform,", "zipf:1"} {
		if got, err := parseSkews(bad); err == nil {
			t.Errorf("parseSkews(%q) = %v, want an error", bad, got)
		}
	}
}

// TestPodPoolSkewedPicks checks the law by which updates pick their Pod:
// uniform makes the same picks as rng.IntN; zipf:1.1 gives the top 1% of
// ranks most picks, and those Pods lie all over the key order.
func TestPodPoolSkewedPicks(t *testing.T) {
	const n, picks, seed = 10_000, 200_000, 42
	keys := make([]podRef, n) // in key order
	for i := range keys {
		keys[i] = podRef{"bench-00", fmt.Sprintf("pod-%05d", i)}
	}
	position := make(map[podRef]int, n)
	for i, r := range keys {
		position[r] = i
	}
	// run makes the picks and returns how often each key position was
	// picked, and the pool.
	run := func(skew churnSkew) ([]int, *podPool) {
		p := newPodPool(slices.Clone(keys), seed, skew)
		counts := make([]int, n)
		for range picks {
			r, ok := p.checkout(false)
			if !ok {
				t.Fatalf("%v: no Pod to update", &skew)
			}
			counts[position[r]]++
			p.release(r)
		}
		return counts, p
	}
	// topShare is the share of the picks that went to the top 1% of ranks.
	topShare := func(counts []int, p *podPool) float64 {
		top := 0
		for _, r := range p.pods.live[:n/100] {
			top += counts[position[r]]
		}
		return float64(top) / picks
	}

	uniform, p := run(churnSkew{})
	if !slices.Equal(p.pods.live, keys) {
		t.Error("uniform skew reordered the pool")
	}
	ref := rand.New(rand.NewPCG(seed, 1))
	want := make([]int, n)
	for range picks {
		want[ref.IntN(n)]++
	}
	if !slices.Equal(uniform, want) {
		t.Error("uniform skew picks differ from rng.IntN's for the same seed")
	}
	if s := topShare(uniform, p); s < 0.008 || s > 0.012 {
		t.Errorf("uniform: top 1%% of ranks got %.2f%% of picks, want about 1%%", 100*s)
	}

	zipf, p := run(churnSkew{zipfS: 1.1})
	// (k+1)^-1.1 over 10,000 ranks: the top 100 have about 65%.
	if s := topShare(zipf, p); s < 0.5 || s > 0.8 {
		t.Errorf("zipf:1.1: top 1%% of ranks got %.1f%% of picks, want about 65%%", 100*s)
	}
	// The 100 most picked Pods spread over every tenth of the key order
	// (about 10 in each for a random permutation).
	byPicks := make([]int, n)
	for i := range byPicks {
		byPicks[i] = i
	}
	slices.SortStableFunc(byPicks, func(a, b int) int { return zipf[b] - zipf[a] })
	var tenths [10]int
	for _, i := range byPicks[:n/100] {
		tenths[i*10/n]++
	}
	t.Logf("zipf:1.1: top 1%% of ranks got %.1f%% of picks; the 100 hottest Pods by tenth of the key order: %v", 100*topShare(zipf, p), tenths)
	for tenth, c := range tenths {
		if c < 2 || c > 25 {
			t.Errorf("zipf:1.1: %d of the 100 hottest Pods in tenth %d of the key order (all tenths: %v), want about 10", c, tenth, tenths)
			break
		}
	}
}

// TestPodPoolKeepsItsSetUnderRandomOps drives pools of either skew with
// seeded random checkouts, releases, deletes and creates, and checks after
// each op that the pool holds exactly the live Pods, each once, and never
// hands out a busy one.
func TestPodPoolKeepsItsSetUnderRandomOps(t *testing.T) {
	for _, skew := range []churnSkew{{}, {zipfS: 1.1}, {zipfS: 3}} {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 7))
			n := 1 + rng.IntN(50)
			live := map[podRef]bool{}
			var start []podRef
			for i := range n {
				r := podRef{"ns", fmt.Sprintf("p%d", i)}
				start, live[r] = append(start, r), true
			}
			p := newPodPool(start, seed, skew)
			busy := map[podRef]bool{}
			created := 0
			for op := range 400 {
				switch rng.IntN(4) {
				case 0, 1: // an update or a delete checks a Pod out
					remove := rng.IntN(2) == 0
					r, ok := p.checkout(remove)
					if !ok {
						continue
					}
					if busy[r] || !live[r] {
						t.Fatalf("%v seed %d op %d: checked out %v (busy %v, live %v)", &skew, seed, op, r, busy[r], live[r])
					}
					busy[r] = true
					if remove {
						delete(live, r)
					}
				case 2: // a request returns
					for r := range busy {
						p.release(r)
						delete(busy, r)
						break
					}
				case 3: // a create
					r := podRef{"ns", fmt.Sprintf("new%d", created)}
					created++
					p.add(r)
					live[r] = true
				}
				if p.len() != len(live) {
					t.Fatalf("%v seed %d op %d: pool holds %d Pods, %d live", &skew, seed, op, p.len(), len(live))
				}
				for i, r := range p.pods.live {
					if !live[r] || p.pods.pos[r] != i {
						t.Fatalf("%v seed %d op %d: pool entry %d is %v (live %v, pos %d)", &skew, seed, op, i, r, live[r], p.pods.pos[r])
					}
				}
			}
		}
	}
}

func TestSkewMeter(t *testing.T) {
	a, b, c, d := podRef{"x", "a"}, podRef{"x", "b"}, podRef{"x", "c"}, podRef{"x", "d"}
	m := newSkewMeter(4)
	var s churnDriveStats
	m.note(opUpdate, a)
	m.note(opUpdate, a)
	m.fill(&s)
	// Fewer changes than a window: the partial window is reported.
	if s.DistinctUpdated != 1 || s.SkewWindows != 0 || s.UpdatesPerPodPerWindow != 2 || s.SkewWindow != 4 {
		t.Errorf("partial window: %+v", s)
	}
	m.note(opUpdate, b)
	m.note(opCreate, podRef{})
	// window 1: a a b + a create: 3 updates of 2 Pods.
	m.note(opUpdate, a)
	m.note(opDelete, b)
	m.note(opUpdate, c)
	m.note(opUpdate, c)
	// window 2: a, c c + a delete: 3 updates of 2 Pods.
	m.note(opUpdate, d) // partial: not in the mean
	m.fill(&s)
	if s.DistinctUpdated != 4 || s.SkewWindows != 2 || s.UpdatesPerPodPerWindow != 1.5 {
		t.Errorf("two windows: %+v", s)
	}
}
