package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The churn driver: changes to the bench's Pods at a steady rate, a mix of
// updates, creates and deletes, as a cluster's workloads make them.

type opKind int

const (
	opUpdate opKind = iota // merge patch of sentAnnot
	opCreate               // a new Pod, sentAnnot set
	opDelete               // grace period 0: the Pod is gone at once
	numOps
)

var opNames = [numOps]string{"update", "create", "delete"}

// opMix is the share of each opKind, in any unit.
type opMix [numOps]int

// churnMix is the churn's mix: it keeps the Pod count about constant.
var churnMix = opMix{80, 10, 10}

func (m opMix) String() string {
	return fmt.Sprintf("%d,%d,%d", m[opUpdate], m[opCreate], m[opDelete])
}

func (m opMix) total() int { return m[opUpdate] + m[opCreate] + m[opDelete] }

// next returns the kind of the change after done (the counts so far): the
// one furthest behind its share of the changes made so far plus this one,
// ties to the lower kind. So after any n changes each kind's count is
// within one of its exact share n·w/W, and the kinds interleave evenly
// (80,10,10 gives 8 updates, a create and a delete in every 10) rather
// than in random runs. A kind of weight 0 is never chosen.
func (m opMix) next(done [numOps]int) opKind {
	n := done[opUpdate] + done[opCreate] + done[opDelete] + 1
	w := m.total()
	best, bestDeficit := opUpdate, 0
	for k := range numOps {
		// (share - done)·W, in integers: w_k·n - done_k·W.
		deficit := m[k]*n - done[k]*w
		if k == opUpdate || deficit > bestDeficit {
			best, bestDeficit = k, deficit
		}
	}
	return best
}

// tokenBucket paces the changes: time credits rate tokens a second, up to
// burst; each change takes one. A pacer that falls behind (every request
// slot busy) catches up by at most burst changes; the credit beyond that
// is dropped and reported, not made up later.
type tokenBucket struct {
	rate, burst, tokens float64
}

// add credits dt and returns the tokens dropped because the bucket was full.
func (b *tokenBucket) add(dt time.Duration) (dropped float64) {
	b.tokens += b.rate * dt.Seconds()
	if b.tokens > b.burst {
		dropped, b.tokens = b.tokens-b.burst, b.burst
	}
	return dropped
}

func (b *tokenBucket) take() bool {
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

type podRef struct{ ns, name string }

// podPool is the bench's Pods that exist, from which updates and deletes
// pick at random. A Pod with a request in flight is busy and is not
// picked again until released, so no update races its Pod's delete.
//
// Under a Zipf skew pods.live is in rank order: updates pick live[k] with
// probability ∝ (k+1)^-s. The ranks are a random permutation of the Pods,
// not their key order, so the hot Pods are scattered over the key space
// and the namespaces, as a cluster's are. Deletes pick uniformly, since
// rollouts and scale-downs do not favour the Pods that change most. A
// delete moves the last Pod into the rank it frees (livePods.remove). A
// created Pod takes a uniformly random rank, whose Pod moves to the end.
// Both keep the ranks a random permutation in O(1), and a hot rank changes
// hands now and then, as hot workloads do. Under uniform skew nothing is
// reordered, and the picks are rng.IntN's for the seed.
type podPool struct {
	mu   sync.Mutex
	pods livePods[podRef] // guarded by mu
	busy map[podRef]bool  // guarded by mu
	rng  *rand.Rand       // guarded by mu
	skew churnSkew
	// zipf draws ranks in [0, zipfN); nil until the first update under a
	// Zipf skew, and made again when the Pod count changes. Guarded by mu.
	zipf  *rand.Zipf
	zipfN int // guarded by mu
}

func newPodPool(live []podRef, seed uint64, skew churnSkew) *podPool {
	p := &podPool{busy: map[podRef]bool{}, rng: rand.New(rand.NewPCG(seed, 1)), skew: skew}
	if skew.zipfS != 0 {
		p.rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	}
	p.pods = newLivePods(live)
	return p
}

// checkout picks an idle Pod at random and marks it busy; remove also takes
// it out of the pool (it is being deleted). False if a few picks found only
// busy Pods (or none at all). An update whose pick is busy picks again by
// the same law, so under a Zipf skew a Pod with a request in flight passes
// its turn to another.
func (p *podPool) checkout(remove bool) (podRef, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 16 {
		if p.pods.len() == 0 {
			break
		}
		r := p.pods.live[p.pickLocked(remove)]
		if p.busy[r] {
			continue
		}
		p.busy[r] = true
		if remove {
			p.pods.remove(r)
		}
		return r, true
	}
	return podRef{}, false
}

// pickLocked returns the index in pods.live of a Pod to update (or, if
// remove, to delete); pods.live is not empty.
func (p *podPool) pickLocked(remove bool) int {
	n := p.pods.len()
	if remove || p.skew.zipfS == 0 {
		return p.rng.IntN(n)
	}
	if p.zipf == nil || p.zipfN != n {
		// O(1): rand.NewZipf precomputes a few constants, no table.
		p.zipf, p.zipfN = rand.NewZipf(p.rng, p.skew.zipfS, 1, uint64(n-1)), n
	}
	return int(p.zipf.Uint64())
}

func (p *podPool) release(r podRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, r)
}

// add puts r (created, or not deleted after all) into the pool; under a
// Zipf skew at a uniformly random rank.
func (p *podPool) add(r podRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods.add(r)
	if p.skew.zipfS != 0 {
		p.pods.swap(p.rng.IntN(p.pods.len()), p.pods.len()-1)
	}
}

func (p *podPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods.len()
}

// churnDriver makes the changes.
type churnDriver struct {
	cs    kubernetes.Interface
	shape podShape
	pool  *podPool
	// newIndex returns the fixture index of the next Pod to create: one
	// whose name no existing Pod has.
	newIndex func() int

	ok, failed [numOps]atomic.Int64
	skipped    atomic.Int64 // an update or delete found no idle Pod

	mu       sync.Mutex
	errs     []string   // the first few distinct errors, guarded by mu
	requests []float64  // milliseconds each successful request took, guarded by mu
	meter    *skewMeter // the successful changes, guarded by mu
}

// okCounts returns the changes of each kind that succeeded so far.
func (d *churnDriver) okCounts() (ok [numOps]int64) {
	for k := range numOps {
		ok[k] = d.ok[k].Load()
	}
	return ok
}

// churnDriveStats is what the driver did.
type churnDriveStats struct {
	TargetPerSec float64 `json:"targetPerSec"`
	MaxInFlight  int     `json:"maxInFlight"`
	// Seconds: from the first change to the return of the last (the
	// requests in flight at --duration are waited for).
	Seconds float64 `json:"seconds"`
	// Per kind (update, create, delete): changes that succeeded and failed.
	OK     map[string]int64 `json:"ok"`
	Failed map[string]int64 `json:"failed"`
	// Succeeded is the sum of OK: the events each informer must see.
	Succeeded      int64   `json:"succeeded"`
	AchievedPerSec float64 `json:"achievedPerSec"` // Succeeded / Seconds
	Skipped        int64   `json:"skipped"`        // no idle Pod to update or delete
	// Dropped: changes the pacer owed but never started, every request
	// slot having been busy for longer than a second's worth of tokens
	// (or at the end of the run).
	Dropped float64 `json:"dropped"`
	// BoundTicks: pacer ticks (10 ms) on which a change was due but every
	// request slot was busy.
	BoundTicks int64 `json:"boundTicks"`
	// Request latency of the successful changes, from the clock read for
	// sentAnnot to the response: the apiserver's and etcd's share of the
	// event latency the handlers measure.
	RequestP50Ms float64  `json:"requestP50Ms"`
	RequestP99Ms float64  `json:"requestP99Ms"`
	Errors       []string `json:"errors,omitempty"`
	// How skewed the successful updates were (see skewMeter): the Pods
	// updated at least once, and the mean updates per Pod updated within a
	// window of SkewWindow successful changes (of any kind), over the
	// SkewWindows full windows, or over the whole run if it had fewer
	// changes than a window (SkewWindows 0).
	DistinctUpdated        int     `json:"distinctUpdated"`
	SkewWindow             int     `json:"skewWindow"`
	SkewWindows            int     `json:"skewWindows"`
	UpdatesPerPodPerWindow float64 `json:"updatesPerPodPerWindow"`
}

// paceTick is how often the pacer credits time and starts changes.
const paceTick = 10 * time.Millisecond

// run makes changes at rate per second for duration, with at most inflight
// requests outstanding, and waits for the last of them.
func (d *churnDriver) run(ctx context.Context, rate float64, duration time.Duration, inflight int) churnDriveStats {
	bucket := tokenBucket{rate: rate, burst: max(1, rate)}
	slots := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	var done [numOps]int
	var boundTicks int64
	var dropped float64
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	start := time.Now()
	end := start.Add(duration)
	last := start
pace:
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			break pace
		case now = <-tick.C:
		}
		if now.After(end) {
			now = end
		}
		dropped += bucket.add(now.Sub(last))
		last = now
	start:
		for bucket.tokens >= 1 {
			select {
			case slots <- struct{}{}:
			default:
				boundTicks++
				break start
			}
			bucket.take()
			kind := churnMix.next(done)
			done[kind]++
			wg.Go(func() {
				defer func() { <-slots }()
				d.do(ctx, kind)
			})
		}
		if !now.Before(end) {
			break
		}
	}
	dropped += math.Floor(bucket.tokens) // due at the end but never started
	wg.Wait()
	s := churnDriveStats{TargetPerSec: rate, MaxInFlight: inflight, Seconds: time.Since(start).Seconds(),
		OK: map[string]int64{}, Failed: map[string]int64{}, Skipped: d.skipped.Load(), Dropped: dropped, BoundTicks: boundTicks}
	for k := range numOps {
		s.OK[opNames[k]], s.Failed[opNames[k]] = d.ok[k].Load(), d.failed[k].Load()
		s.Succeeded += d.ok[k].Load()
	}
	s.AchievedPerSec = float64(s.Succeeded) / s.Seconds
	d.mu.Lock()
	s.Errors = d.errs
	s.RequestP50Ms, s.RequestP99Ms = percentile(d.requests, 0.5), percentile(d.requests, 0.99)
	d.meter.fill(&s)
	d.mu.Unlock()
	return s
}

// do makes one change of kind k. sentAnnot is set from the clock just
// before the request, so the latency a handler measures includes the
// apiserver's and etcd's share, as a controller sees it.
func (d *churnDriver) do(ctx context.Context, k opKind) {
	var err error
	var sent time.Time
	var r podRef // the Pod patched or deleted
	switch k {
	case opUpdate:
		var ok bool
		r, ok = d.pool.checkout(false)
		if !ok {
			d.skipped.Add(1)
			return
		}
		defer d.pool.release(r)
		sent = time.Now()
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, sentAnnot, sent.UnixNano())
		_, err = d.cs.CoreV1().Pods(r.ns).Patch(ctx, r.name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	case opCreate:
		p := d.shape.pod(d.newIndex())
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		sent = time.Now()
		p.Annotations[sentAnnot] = strconv.FormatInt(sent.UnixNano(), 10)
		if _, err = d.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err == nil {
			d.pool.add(podRef{p.Namespace, p.Name})
		}
	case opDelete:
		var ok bool
		r, ok = d.pool.checkout(true)
		if !ok {
			d.skipped.Add(1)
			return
		}
		defer d.pool.release(r)
		// Grace period 0: a Pod with a node and no kubelet would otherwise
		// only get a deletionTimestamp (an update) and stay.
		var immediately int64
		sent = time.Now()
		err = d.cs.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{GracePeriodSeconds: &immediately})
		if err != nil && !apierrors.IsNotFound(err) {
			d.pool.add(r) // still there, as far as we know
		}
	}
	if err != nil {
		d.failed[k].Add(1)
		d.noteError(fmt.Sprintf("%s: %v", opNames[k], err))
		return
	}
	took := float64(time.Since(sent).Microseconds()) / 1e3
	d.ok[k].Add(1)
	d.mu.Lock()
	d.requests = append(d.requests, took)
	d.meter.note(k, r)
	d.mu.Unlock()
}

// noteError keeps the first few distinct error messages.
func (d *churnDriver) noteError(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 10 && !slices.Contains(d.errs, msg) {
		d.errs = append(d.errs, msg)
	}
}
