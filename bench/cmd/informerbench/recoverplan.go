package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// What the recover subcommand (runRecover) changes while no informer runs:
// how many Pods (--changed, or a downtime at a write rate), of which kinds
// (recoverMix), and which Pods.

// changeAmount is one value of --changed: a fraction of the Pods ("1%") or
// a count ("1000", "1k").
type changeAmount struct {
	label    string
	fraction float64 // > 0 for a percentage
	count    int     // otherwise
}

// parseChanged reads --changed: comma-separated percentages or counts.
func parseChanged(v string) ([]changeAmount, error) {
	var out []changeAmount
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasSuffix(s, "%"):
			f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
			if err != nil || f <= 0 || f > 100 {
				return nil, fmt.Errorf("--changed %q: a percentage must be above 0 and at most 100, e.g. 0.1%%", s)
			}
			out = append(out, changeAmount{label: s, fraction: f / 100})
		default:
			n, err := benchkit.ParseCount(s)
			if err != nil {
				return nil, fmt.Errorf("--changed %q: want a percentage (1%%) or a count (1000, 1k)", s)
			}
			out = append(out, changeAmount{label: s, count: n})
		}
	}
	return out, nil
}

// of returns how many of n Pods the amount changes: a fraction rounded to
// the nearest Pod, at least one; a count as given; never more than n.
func (a changeAmount) of(n int) int {
	if a.fraction > 0 {
		return min(max(int(math.Round(a.fraction*float64(n))), 1), n)
	}
	return min(a.count, n)
}

// downtimeChanges emulates a downtime d at rate writes a second on n Pods:
// the writes made meanwhile, and how many distinct Pods they change when
// each write picks a Pod uniformly at random — n·(1 − e^(−writes/n)) in
// expectation, since a Pod written twice is one change to an informer that
// was not watching. expired: d is longer than the apiserver's watch
// history (window), so the restart cannot resume.
func downtimeChanges(d time.Duration, rate float64, window time.Duration, n int) (writes, changed int, expired bool) {
	writes = int(math.Round(rate * d.Seconds()))
	if n > 0 {
		changed = min(int(math.Round(float64(n)*-math.Expm1(-float64(writes)/float64(n)))), writes)
	}
	return writes, changed, d > window
}

// changeKind is one kind of change made while no informer runs.
type changeKind int

const (
	changeUpdate   changeKind = iota // a label changed (merge patch)
	changeDelete                     // deleted (grace period 0)
	changeRecreate                   // deleted and created again under the same name: a new UID
	changeCreate                     // a new Pod
	numChangeKinds
)

// changeMix is the share of each changeKind among the changed Pods, in any
// unit. Deletes and creates weigh the same, so that the collection keeps
// its size, which every start checks exactly.
type changeMix [numChangeKinds]int

// recoverMix is the recover subcommand's mix: mostly label updates.
var recoverMix = changeMix{80, 5, 10, 5}

func (m changeMix) String() string {
	return fmt.Sprintf("%d,%d,%d,%d", m[changeUpdate], m[changeDelete], m[changeRecreate], m[changeCreate])
}

func (m changeMix) total() int {
	return m[changeUpdate] + m[changeDelete] + m[changeRecreate] + m[changeCreate]
}

// changeCounts is how many Pods of each kind one batch changes.
type changeCounts struct {
	Update   int `json:"updated"`
	Delete   int `json:"deleted"`
	Recreate int `json:"recreated"`
	Create   int `json:"created"`
}

// Total is the Pods changed: each update, delete, recreate and create is
// one key an informer that was down finds changed.
func (c changeCounts) Total() int { return c.Update + c.Delete + c.Recreate + c.Create }

func (c changeCounts) String() string {
	return fmt.Sprintf("%d label updates, %d deleted, %d deleted and recreated under the same name, %d created", c.Update, c.Delete, c.Recreate, c.Create)
}

// counts splits c changes by the mix: deletes and creates in pairs (each
// half of their joint share, rounded), recreates by their share, updates
// the rest, so the counts add up to c exactly and the collection keeps its
// size. Rounding gives small batches to updates first: one change is one
// update.
func (m changeMix) counts(c int) changeCounts {
	w := float64(m.total())
	pairs := int(math.Round(float64(c) * float64(m[changeDelete]+m[changeCreate]) / w / 2))
	recreate := int(math.Round(float64(c) * float64(m[changeRecreate]) / w))
	pairs = min(pairs, c/2)
	recreate = min(recreate, c-2*pairs)
	out := changeCounts{Delete: pairs, Create: pairs, Recreate: recreate}
	out.Update = c - out.Delete - out.Create - out.Recreate
	return out
}

// livePods is a set to pick from uniformly at random: the recover plan's
// Pod indices, the churn pool's Pods. Add and remove take O(1).
type livePods[T comparable] struct {
	live []T       // in no particular order
	pos  map[T]int // index in live of each member
}

func newLivePods[T comparable](live []T) livePods[T] {
	s := livePods[T]{live: live, pos: make(map[T]int, len(live))}
	for i, x := range live {
		s.pos[x] = i
	}
	return s
}

func (s *livePods[T]) len() int { return len(s.live) }

func (s *livePods[T]) swap(i, j int) {
	s.live[i], s.live[j] = s.live[j], s.live[i]
	s.pos[s.live[i]], s.pos[s.live[j]] = i, j
}

func (s *livePods[T]) remove(x T) {
	last := len(s.live) - 1
	s.swap(s.pos[x], last)
	s.live = s.live[:last]
	delete(s.pos, x)
}

func (s *livePods[T]) add(x T) {
	s.pos[x] = len(s.live)
	s.live = append(s.live, x)
}

// podSet is the bench's Pods that exist, by index (podShape.podName and
// namespaceOf name Pod i). It starts as Pods 0..n-1; created Pods take new
// indices from n on.
type podSet struct {
	livePods[int]
	next int // the next new index
}

func newPodSet(n int) *podSet {
	live := make([]int, n)
	for i := range n {
		live[i] = i
	}
	return &podSet{livePods: newLivePods(live), next: n}
}

// changePlan is one batch of changes, each Pod in at most one list.
type changePlan struct {
	update, delete, recreate, create []int
}

func (p changePlan) counts() changeCounts {
	return changeCounts{Update: len(p.update), Delete: len(p.delete), Recreate: len(p.recreate), Create: len(p.create)}
}

// plan picks distinct live Pods uniformly at random for the updates,
// deletes and recreates of c (and new indices for the creates), and
// applies the batch to s: the deleted Pods leave it, the created ones join.
// It fails if s has fewer live Pods than c asks to touch.
func (s *podSet) plan(c changeCounts, rng *rand.Rand) (changePlan, error) {
	touch := c.Update + c.Delete + c.Recreate
	if touch > len(s.live) {
		return changePlan{}, fmt.Errorf("cannot change %d of %d Pods", touch, len(s.live))
	}
	// A partial Fisher–Yates shuffle: the first touch entries of live
	// become a uniform sample without replacement.
	for i := range touch {
		j := i + rng.IntN(len(s.live)-i)
		s.swap(i, j)
	}
	picked := append([]int(nil), s.live[:touch]...)
	p := changePlan{
		update:   picked[:c.Update],
		delete:   picked[c.Update : c.Update+c.Delete],
		recreate: picked[c.Update+c.Delete:],
	}
	for _, i := range p.delete {
		s.remove(i)
	}
	for range c.Create {
		p.create = append(p.create, s.next)
		s.add(s.next)
		s.next++
	}
	return p, nil
}
