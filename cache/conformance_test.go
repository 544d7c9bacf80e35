package cache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// This file holds the differential conformance test. client-go v0.37.2's
// SharedIndexInformer and ours run side by side on one
// FakeControllerSource, fed a random stream in phases. Every handler's
// events are compared after each phase. Warm restarts of our informer are
// checked against a model of what client-go's delta processing requires.
// The shared machinery is in conformance_harness_test.go.

// confSlot is one handler, registered on both informers.
type confSlot struct {
	id      int
	cgRec   *confRecorder
	cgReg   cache.ResourceEventHandlerRegistration
	ourRec  *confRecorder // replaced on every restart of ours
	ourReg  cache.ResourceEventHandlerRegistration
	removed bool
	period  time.Duration // resync period asked for; -1: the default
	// ourSyncing mirrors our processor's "due for sync notifications" mark
	// for this handler, which decides whether updates that keep the
	// resourceVersion reach it. client-go marks every new listener. No
	// resync check runs during a seed, with no resync period or an hour. So
	// on client-go's side every handler stays marked. Ours does the same
	// until it has started warm. From then on it marks exactly the handlers
	// with a resync period (processor.SelectResyncingListeners). That holds
	// for those registered before the start and those added later alike.
	// The relist after a 410 thus sends unchanged objects only to handlers
	// that asked for resyncs.
	ourSyncing bool
	// Expected events of the current phase.
	cgWant, ourWant []string
}

type confRun struct {
	seed  int64
	rng   *rand.Rand
	logf  func(string, ...any)
	path  string
	src   *confSource
	phase atomic.Int64
	kind  string // current phase's kind, for messages

	transform    bool
	cacheObjects int
	maxStream    int
	// resync is both informers' default resync period: 0, or an hour, which
	// never elapses during a seed, so client-go never evaluates its
	// handlers' resync schedules and every handler counts as syncing.
	resync time.Duration

	cg       cache.SharedIndexInformer
	cgLW     *confLW
	cgCancel context.CancelFunc
	cgDone   chan struct{}

	ours    *confOurs // nil while down
	restart int
	// oursWarm is set once ours has started warm: from then on it marks
	// for sync notifications only handlers with a resync period.
	oursWarm bool

	slots        []*confSlot
	relistBudget int // client-go relists left (each costs its growing backoff)
	stats        *confStats
}

// confStats counts what the seeds covered.
type confStats struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *confStats) add(what string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[what] += n
}

func (s *confStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, s.counts[k]))
	}
	return strings.Join(parts, " ")
}

// TestConformance runs client-go's informer and ours on the same source
// through random phases.
//
//   - Streams of adds, updates and deletes.
//   - Dropped watch events followed by ResetWatch, a 410 on which both
//     relist.
//   - ResetWatch alone, on which both watch again.
//   - Handlers added late and removed.
//   - Warm restarts of ours, with and without 410, with a handler joining
//     concurrently with the restart.
//
// After every phase both informers quiesce. Every handler's events of that
// phase must then be identical. The order client-go leaves to map
// iteration may differ. A relist's unchanged objects are left out for
// handlers a warm start did not mark (see confSlot.ourSyncing). Both stores
// and namespace indexes must equal the source. client-go's events must
// match the model the warm-restart expectations are built from.
//
// -conformance.seeds sets the number of seeds, -conformance.seed=N runs
// one (failures print it), -conformance.verbose logs every seed's phases.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("differential conformance runs real informers for several seconds")
	}
	stats := &confStats{}
	confRunSeeds(t, "TestConformance", confSeedList(*confSeeds), func(seed int64, dir string, logf func(string, ...any)) error {
		return runConformanceSeed(seed, dir, logf, stats)
	})
	t.Logf("covered: %s", stats)
}

func runConformanceSeed(seed int64, dir string, logf func(string, ...any), stats *confStats) (err error) {
	rng := rand.New(rand.NewSource(seed))
	r := &confRun{
		seed:         seed,
		rng:          rng,
		logf:         logf,
		path:         filepath.Join(dir, "cache.db"),
		src:          newConfSource(),
		transform:    rng.Intn(3) == 0,
		cacheObjects: []int{0, 0, 2}[rng.Intn(3)],
		maxStream:    8,
		relistBudget: rng.Intn(3), // 0, 1 or 2 client-go relists
		stats:        stats,
	}
	if rng.Intn(3) == 0 {
		r.resync = time.Hour
	}
	phases := 6 + rng.Intn(7)
	if confRaceEnabled {
		// Same seeds, somewhat shorter streams: the race detector slows
		// everything down several times.
		phases = 5 + rng.Intn(6)
		r.maxStream = 6
	}
	defer func() {
		if stopErr := r.stopAll(); err == nil {
			err = stopErr
		}
	}()
	if err := r.start(); err != nil {
		return err
	}
	for i := 0; i < phases; i++ {
		if err := r.randomPhase(); err != nil {
			return err
		}
	}
	return r.finish()
}

func (r *confRun) live() []*confSlot {
	var out []*confSlot
	for _, s := range r.slots {
		if !s.removed {
			out = append(out, s)
		}
	}
	return out
}

func (r *confRun) newSlot() *confSlot {
	s := &confSlot{id: len(r.slots), period: -1, ourSyncing: true}
	s.cgRec = newConfRecorder(fmt.Sprintf("client-go handler %d", s.id), &r.phase, r.transform)
	r.slots = append(r.slots, s)
	return s
}

// register adds slot s's handlers to both informers, with a resync period
// chosen for the slot.
func (r *confRun) register(s *confSlot) error {
	if r.resync > 0 {
		s.period = []time.Duration{0, r.resync, 2 * r.resync, -1}[r.rng.Intn(4)]
	}
	var err error
	if s.cgReg, err = r.addHandler(r.cg, s.cgRec, s.period); err != nil {
		return err
	}
	s.ourReg, err = r.addHandler(r.ours.inf, s.ourRec, s.period)
	return err
}

// effectivePeriod is the resync period the informers give slot s: zero
// when they do not resync at all.
func (r *confRun) effectivePeriod(s *confSlot) time.Duration {
	switch {
	case r.resync == 0:
		return 0
	case s.period < 0:
		return r.resync
	}
	return s.period
}

// addHandler registers h with resync period p (-1: the informer's default).
func (r *confRun) addHandler(inf cache.SharedInformer, h cache.ResourceEventHandler, p time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	if p < 0 {
		return inf.AddEventHandler(h)
	}
	return inf.AddEventHandlerWithResyncPeriod(h, p)
}

func (r *confRun) newOurRecorder(s *confSlot) *confRecorder {
	return newConfRecorder(fmt.Sprintf("our handler %d (incarnation %d)", s.id, r.restart), &r.phase, r.transform)
}

// start fills the source, starts both informers cold with 1–3 handlers and
// checks the initial list (phase 0).
func (r *confRun) start() error {
	r.kind = "initial list"
	n := r.rng.Intn(10)
	for i := 0; i < n; i++ {
		r.randomChange(false)
	}
	if r.src.lastRV == 0 {
		// A never-changed fake lists at resourceVersion "0", which is no
		// point in history; see TestConformanceWarmStartFromResourceVersionZero.
		r.randomChange(false)
	}
	if r.rng.Intn(3) == 0 {
		r.src.resetWatch() // history before the start is gone; irrelevant to a cold start
	}
	r.logf("seed %d: transform=%t cacheObjects=%d resync=%v relistBudget=%d, initial source %v", r.seed, r.transform, r.cacheObjects, r.resync, r.relistBudget, r.src.state())

	r.cgLW = newConfLW(r.src)
	r.cg = cache.NewSharedIndexInformer(r.cgLW, &corev1.Pod{}, r.resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if r.transform {
		if err := r.cg.SetTransform(confTransform); err != nil {
			return err
		}
	}
	_ = r.cg.SetWatchErrorHandler(func(*cache.Reflector, error) {})
	ours, err := openConfOurs(r.src, r.oursOptions())
	if err != nil {
		return err
	}
	r.ours = ours

	initial := confInitialEvents(r.src.state())
	for i := 1 + r.rng.Intn(3); i > 0; i-- {
		s := r.newSlot()
		s.ourRec = r.newOurRecorder(s)
		if err := r.register(s); err != nil {
			return err
		}
		s.cgWant, s.ourWant = initial, initial
	}
	r.logf("phase 0: cold start of both informers with %d handlers", len(r.slots))

	ctx, cancel := context.WithCancel(context.Background())
	r.cgCancel, r.cgDone = cancel, make(chan struct{})
	go func() {
		defer close(r.cgDone)
		r.cg.RunWithContext(ctx)
	}()
	r.ours.run()

	// Sometimes a handler joins while both informers are still listing:
	// whatever the timing, it must see every listed object exactly once,
	// as an initial add.
	if r.rng.Intn(3) == 0 {
		s := r.newSlot()
		s.ourRec = r.newOurRecorder(s)
		if err := r.register(s); err != nil {
			return err
		}
		s.cgWant, s.ourWant = initial, initial
		r.logf("  handler %d joins during the initial list", s.id)
	}
	r.stats.add("cold-starts", 1)
	return r.endPhase()
}

func (r *confRun) oursOptions() confOursOptions {
	return confOursOptions{
		path:          r.path,
		batchInterval: time.Duration(1+r.rng.Intn(5)) * time.Millisecond,
		cacheObjects:  r.cacheObjects,
		transform:     r.transform,
		resync:        r.resync,
	}
}

var confNamespaces = []string{"ns0", "ns1"}

const confNamesPerNamespace = 12

// randomChange makes one random add, update or delete on the source.
func (r *confRun) randomChange(broadcast bool) confChange {
	keys := r.src.state().keys()
	op := r.rng.Intn(10)
	if op < 4 || len(keys) == 0 {
		// Add a key that does not exist (it may have existed before).
		for try := 0; try < 20; try++ {
			ns := confNamespaces[r.rng.Intn(len(confNamespaces))]
			name := fmt.Sprintf("p%02d", r.rng.Intn(confNamesPerNamespace))
			if _, ok := r.src.objs[ns+"/"+name]; ok {
				continue
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"gen": strconv.Itoa(r.rng.Intn(1000))}}}
			return r.src.change(watch.Added, p, broadcast)
		}
		op = 5 // everything exists: modify instead
	}
	key := keys[r.rng.Intn(len(keys))]
	p := r.src.objs[key].DeepCopy()
	if op < 7 {
		p.Labels = map[string]string{"gen": strconv.Itoa(r.rng.Intn(1000))}
		return r.src.change(watch.Modified, p, broadcast)
	}
	return r.src.change(watch.Deleted, p, broadcast)
}

// expectAll expects every live handler of every running informer to see ev.
func (r *confRun) expectAll(ev string) {
	for _, s := range r.live() {
		s.cgWant = append(s.cgWant, ev)
		if r.ours != nil {
			s.ourWant = append(s.ourWant, ev)
		}
	}
}

func (r *confRun) randomPhase() error {
	switch p := r.rng.Intn(100); {
	case p < 30:
		return r.phaseStream()
	case p < 45:
		return r.phaseDisrupt()
	case p < 57:
		return r.phaseJoin()
	case p < 65:
		return r.phaseRemove()
	default:
		return r.phaseWarmRestart()
	}
}

// phaseStream: adds, updates and deletes, each delivered by watch.
func (r *confRun) phaseStream() error {
	r.kind = "stream"
	n := 1 + r.rng.Intn(r.maxStream)
	var evs []string
	for i := 0; i < n; i++ {
		c := r.randomChange(true)
		r.expectAll(c.watchEvent)
		evs = append(evs, c.watchEvent)
	}
	r.logf("phase %d: stream %v", r.phase.Load(), evs)
	r.stats.add("stream-events", n)
	return r.endPhase()
}

// ensureEventfulWatches makes sure every running informer's watch has
// delivered an event before the test closes it. client-go treats a watch
// that closes within a second without events as broken and relists; ours
// watches again. That difference is deliberate (reflector/doc.go), so the
// stream avoids it.
func (r *confRun) ensureEventfulWatches() error {
	needed := false
	if w := r.cgLW.active(); w == nil || w.events.Load() == 0 {
		needed = true
	}
	if r.ours != nil {
		if w := r.ours.lw.active(); w == nil || w.events.Load() == 0 {
			needed = true
		}
	}
	if !needed {
		return nil
	}
	c := r.randomChange(true)
	r.expectAll(c.watchEvent)
	r.logf("  (warm-up change so the watches have delivered an event: %s)", c.watchEvent)
	return r.waitQuiet()
}

// phaseDisrupt closes every watch with a ResetWatch. When it dropped
// changes the watches never delivered, it also flushes the history the
// watches would resume from. Both informers then get 410 and relist. The
// relist gives deletions as DeletedFinalStateUnknown, then the list in
// order. Unchanged objects come as same-resourceVersion updates. No resync
// check runs during a seed, so client-go sends those to every handler. Ours
// sends them to every handler it still marks for sync notifications (see
// confSlot.ourSyncing).
func (r *confRun) phaseDisrupt() error {
	r.kind = "disrupt"
	if err := r.ensureEventfulWatches(); err != nil {
		return err
	}
	known := r.src.state()
	dropped := 0
	if r.relistBudget > 0 {
		r.relistBudget--
		dropped = 1 + r.rng.Intn(5)
	}
	var evs []string
	for i := 0; i < dropped; i++ {
		evs = append(evs, r.randomChange(false).watchEvent)
	}
	r.src.resetWatch()
	if dropped > 0 {
		for _, e := range confRelistEvents(known, r.src.state()) {
			for _, s := range r.live() {
				s.cgWant = append(s.cgWant, e.event)
				if !e.unchanged || s.ourSyncing {
					s.ourWant = append(s.ourWant, e.event)
				}
			}
		}
		r.logf("phase %d: dropped %v, ResetWatch → both relist %v", r.phase.Load(), evs, r.src.state())
		r.stats.add("relists-differential", 1)
		for _, s := range r.live() {
			if !s.ourSyncing {
				r.stats.add("relists-differential-with-unmarked-handler", 1)
				break
			}
		}
	} else {
		r.logf("phase %d: ResetWatch with nothing missed → both watch again", r.phase.Load())
		r.stats.add("rewatches", 1)
	}
	return r.endPhase()
}

// phaseJoin: a handler added to both running informers gets synthetic
// initial adds of the store.
func (r *confRun) phaseJoin() error {
	r.kind = "join"
	s := r.newSlot()
	s.ourRec = r.newOurRecorder(s)
	if err := r.register(s); err != nil {
		return err
	}
	s.ourSyncing = !r.oursWarm || r.effectivePeriod(s) > 0
	s.cgWant = confInitialEvents(r.src.state())
	s.ourWant = s.cgWant
	r.logf("phase %d: handler %d joins late", r.phase.Load(), s.id)
	r.stats.add("late-joins", 1)
	return r.endPhase()
}

// phaseRemove: a handler removed from both gets nothing more; then a few
// changes that only the others see.
func (r *confRun) phaseRemove() error {
	r.kind = "remove"
	live := r.live()
	if len(live) < 2 {
		return r.phaseJoin()
	}
	s := live[r.rng.Intn(len(live))]
	if err := r.cg.RemoveEventHandler(s.cgReg); err != nil {
		return err
	}
	if err := r.ours.inf.RemoveEventHandler(s.ourReg); err != nil {
		return err
	}
	s.removed = true
	var evs []string
	for i := r.rng.Intn(3); i > 0; i-- {
		c := r.randomChange(true)
		r.expectAll(c.watchEvent)
		evs = append(evs, c.watchEvent)
	}
	r.logf("phase %d: handler %d removed, then %v", r.phase.Load(), s.id, evs)
	r.stats.add("removals", 1)
	return r.endPhase()
}

// phaseWarmRestart stops ours, changes the source, and starts ours again
// from its file with fresh handlers. Ours must deliver what client-go's
// delta processing would deliver for a store holding the stored state.
// That is OnAdd(obj, true) for exactly the stored objects, then the missed
// changes as ordinary events, since the fake still has the history. After a
// 410 it is the relist's reconciliation against the stored state instead.
// Objects deleted meanwhile come as DeletedFinalStateUnknown, changed ones
// as updates, and new ones as OnAdd(obj, false). Unchanged objects go only
// to handlers with a resync period, as the design promises. client-go marks
// all its listeners until its first resync check, so it would send them to
// every handler. client-go's informer keeps running and sees the changes as
// ordinary events.
func (r *confRun) phaseWarmRestart() error {
	r.kind = "warm restart"
	force410 := r.rng.Intn(2) == 0
	if force410 {
		// The ResetWatch below closes client-go's watch too.
		if err := r.ensureEventfulWatches(); err != nil {
			return err
		}
	} else if r.src.lastRV == r.src.resetRV {
		// No change since the latest ResetWatch: the fake would refuse a
		// resume from lastRV once anything changes (off by one). Give the
		// resume some history.
		c := r.randomChange(true)
		r.expectAll(c.watchEvent)
		if err := r.waitQuiet(); err != nil {
			return err
		}
	}
	stored := r.src.state()
	storedRV, err := r.ours.stop()
	r.ours = nil
	if err != nil {
		return err
	}
	if want := strconv.Itoa(r.src.lastRV); storedRV != want {
		return fmt.Errorf("phase %d: after a clean stop the file holds resourceVersion %q, want %q (the last one the informer processed)", r.phase.Load(), storedRV, want)
	}
	if force410 {
		r.src.resetWatch()
		// client-go must be watching the new broadcaster before anything
		// changes, or it gets 410 too.
		if err := poll.Wait(10*time.Second, func() bool { return r.cgLW.active() != nil }); err != nil {
			return fmt.Errorf("client-go did not watch again after ResetWatch: %w", err)
		}
	}
	var missed []string
	for i := r.rng.Intn(7); i > 0; i-- {
		c := r.randomChange(true)
		missed = append(missed, c.watchEvent)
		for _, s := range r.live() {
			s.cgWant = append(s.cgWant, c.watchEvent)
		}
	}
	final := r.src.state()
	storedN, _ := strconv.Atoi(storedRV)
	expired := r.src.resumeExpires(storedN)

	r.restart++
	ours, err := openConfOurs(r.src, r.oursOptions())
	if err != nil {
		return err
	}
	r.ours = ours
	// The reopened file must hold exactly the state at the stop (read
	// through the Indexer: listers serve nothing before Run checks the
	// provenance).
	if got := confStateOf(ours.inf.Indexer().List()); !confEqualState(got, stored) {
		return fmt.Errorf("phase %d: reopened file holds %v, want the state at the stop %v", r.phase.Load(), got, stored)
	}
	if got := ours.inf.Indexer().LastStoreSyncResourceVersion(); got != storedRV {
		return fmt.Errorf("phase %d: reopened file's resourceVersion %q, want %q", r.phase.Load(), got, storedRV)
	}
	// The warm start marks for sync notifications exactly the handlers with
	// a resync period: only they get the unchanged objects of a relist.
	r.oursWarm = true
	for _, s := range r.live() {
		s.ourRec = r.newOurRecorder(s)
		if s.ourReg, err = r.addHandler(ours.inf, s.ourRec, s.period); err != nil {
			return err
		}
		s.ourSyncing = r.effectivePeriod(s) > 0
		s.ourWant = confInitialEvents(stored)
		if !expired {
			s.ourWant = append(s.ourWant, missed...)
			continue
		}
		for _, e := range confRelistEvents(stored, final) {
			if !e.unchanged || s.ourSyncing {
				s.ourWant = append(s.ourWant, e.event)
			}
		}
	}
	path := "resumes and receives the missed changes"
	if expired {
		path = "gets 410 and relists"
		r.stats.add("warm-restarts-410", 1)
	} else {
		r.stats.add("warm-restarts-resumed", 1)
	}
	r.logf("phase %d: ours stopped at rv %s with %v; force410=%t; while down %v; restart %s → final %v", r.phase.Load(), storedRV, stored, force410, missed, path, final)

	// Sometimes a handler joins while ours is starting. Whatever the timing
	// it must see each object once: the stored state as initial adds, then
	// events, or the state at its join as initial adds, then the rest.
	var joiner *confRecorder
	var joinerReg cache.ResourceEventHandlerRegistration
	joinErr := make(chan error, 1)
	if r.rng.Intn(3) == 0 {
		joiner = newConfRecorder("handler joining during the warm start", &r.phase, r.transform)
		go func() {
			// Join as soon as Run has marked the informer started.
			for !ours.inf.HasStarted() {
				runtime.Gosched()
			}
			var err error
			joinerReg, err = ours.inf.AddEventHandler(joiner)
			joinErr <- err
		}()
		r.logf("  a handler joins concurrently with the restart")
	}
	ours.run()
	if err := r.endPhase(); err != nil {
		return err
	}
	if joiner != nil {
		if err := <-joinErr; err != nil {
			return err
		}
		// It must know what the source holds now (final, and the fences
		// endPhase sent). Wait until it does (or has gone wrong); the checks
		// below say which.
		now := r.src.state()
		_ = poll.Wait(10*time.Second, func() bool {
			st, err := confReplay(joiner.all())
			return err != nil || confEqualState(st, now)
		})
		st, err := confReplay(joiner.all())
		if err != nil {
			return fmt.Errorf("phase %d: handler that joined during the warm start: %w\nits events: %v", r.phase.Load()-1, err, confEventStrings(joiner.all()))
		}
		if !confEqualState(st, now) {
			return fmt.Errorf("phase %d: handler that joined during the warm start was told %v, the source holds %v\nits events: %v", r.phase.Load()-1, st, now, confEventStrings(joiner.all()))
		}
		if err := ours.inf.RemoveEventHandler(joinerReg); err != nil {
			return err
		}
		r.stats.add("warm-concurrent-joins", 1)
	}
	return nil
}

// waitQuiet waits until both informers have caught up with the source.
// Every handler must have at least the expected number of events for this
// phase. Both stores must equal the source. Each informer must have a watch
// open on the live broadcaster, so the next change reaches both the same
// way. waitQuiet then sends a fence (see fence) and waits until every
// handler has recorded it. So no event of the phase is still in flight when
// the phase is compared.
func (r *confRun) waitQuiet() error {
	p := r.phase.Load()
	timeout := 30 * time.Second
	want := r.src.state()
	fence := "" // the fence change's watch event, once sent
	counted := func() (cgReached, reached, over bool, desc string) {
		cgReached = true
		reached = true
		var b strings.Builder
		for _, s := range r.slots {
			c := s.cgRec.phaseCount(p)
			fmt.Fprintf(&b, " cg%d=%d/%d", s.id, c, len(s.cgWant))
			cgReached = cgReached && c >= len(s.cgWant)
			over = over || c > len(s.cgWant)
			if s.ourRec != nil && r.ours != nil {
				c := s.ourRec.phaseCount(p)
				fmt.Fprintf(&b, " ours%d=%d/%d", s.id, c, len(s.ourWant))
				reached = reached && c >= len(s.ourWant)
				over = over || c > len(s.ourWant)
			}
		}
		return cgReached, reached && cgReached, over, b.String()
	}
	// What the last check saw, for the error.
	var over bool
	var desc, synced string
	var cgState, ourState confState
	err := poll.Wait(timeout, func() bool {
		var cgReached, reached bool
		cgReached, reached, over, desc = counted()
		cgState = confStateOf(r.cg.GetStore().List())
		storesOK := confEqualState(cgState, want)
		watching := r.cgLW.active() != nil
		if r.ours != nil {
			ourState = confStateOf(r.ours.inf.GetStore().List())
			storesOK = storesOK && confEqualState(ourState, want)
			watching = watching && r.ours.lw.active() != nil
		}
		synced = r.synced()
		// With more events than expected somewhere, go on to the comparison
		// once client-go has caught up, so it shows the whole phase.
		if over && cgReached && storesOK && watching {
			return true
		}
		if !reached || !storesOK || !watching || synced != "" {
			return false
		}
		if fence == "" {
			// Caught up, but events may still be in flight. Send one more
			// change by watch: a handler that has recorded it has recorded
			// everything sent before it.
			fence = r.fence()
			want = r.src.state()
			return false
		}
		// The reflectors record an event's resourceVersion after queueing
		// it, so a handler may have the fence before LastSyncResourceVersion
		// says so; endPhase checks it, so wait for it too.
		return r.fenceSeen(p, fence) && r.lastSyncRVs() == r.wantRVs()
	})
	if err == nil || over {
		return nil // with over, the comparison says what differs
	}
	msg := fmt.Sprintf("phase %d (%s) did not quiesce within %v: events%s; %s; fence %q; LastSyncResourceVersions %s, want %s; source %v; client-go store %v",
		p, r.kind, timeout, desc, synced, fence, r.lastSyncRVs(), r.wantRVs(), want, cgState)
	if r.ours != nil {
		l, w, e := r.ours.lw.counts()
		msg += fmt.Sprintf("; our store %v; our lists=%d watches=%d watch errors=%d watching=%t", ourState, l, w, e, r.ours.lw.active() != nil)
	}
	l, w, e := r.cgLW.counts()
	msg += fmt.Sprintf("; client-go lists=%d watches=%d watch errors=%d watching=%t", l, w, e, r.cgLW.active() != nil)
	return errors.New(msg + r.phaseDump(p))
}

// lastSyncRVs returns the running informers' LastSyncResourceVersions, as
// "client-go[/ours]".
func (r *confRun) lastSyncRVs() string {
	if r.ours == nil {
		return r.cg.LastSyncResourceVersion()
	}
	return r.cg.LastSyncResourceVersion() + "/" + r.ours.inf.LastSyncResourceVersion()
}

// wantRVs is lastSyncRVs once both informers have seen the source's last
// change.
func (r *confRun) wantRVs() string {
	want := strconv.Itoa(r.src.lastRV)
	if r.ours == nil {
		return want
	}
	return want + "/" + want
}

// fence makes one change, sent by watch, that every live handler of every
// running informer is expected to see, and returns its watch event. Handlers
// get events in the order the source made them, so one that has recorded
// the fence has recorded every earlier change.
func (r *confRun) fence() string {
	ev := confFence(r.src)
	r.expectAll(ev)
	return ev
}

// fenceSeen reports whether every live handler has recorded the fence event
// in phase p.
func (r *confRun) fenceSeen(p int64, fence string) bool {
	seen := func(rec *confRecorder) bool {
		return slices.ContainsFunc(rec.phaseEvents(p), func(e string) bool { return strings.HasPrefix(e, fence) })
	}
	for _, s := range r.live() {
		if !seen(s.cgRec) {
			return false
		}
		if r.ours != nil && s.ourRec != nil && !seen(s.ourRec) {
			return false
		}
	}
	return true
}

// synced says which informer or live registration has not synced yet ("" if
// all have). A registration syncs once the informer has and the handler has
// handled its initial adds; like client-go's, ours notices asynchronously.
func (r *confRun) synced() string {
	var not []string
	if !r.cg.HasSynced() {
		not = append(not, "client-go informer")
	}
	if r.ours != nil && !r.ours.inf.HasSynced() {
		not = append(not, "our informer")
	}
	for _, s := range r.live() {
		if !s.cgReg.HasSynced() {
			not = append(not, fmt.Sprintf("client-go handler %d", s.id))
		}
		if r.ours != nil && s.ourReg != nil && !s.ourReg.HasSynced() {
			not = append(not, fmt.Sprintf("our handler %d", s.id))
		}
	}
	if len(not) == 0 {
		return ""
	}
	return "not synced: " + strings.Join(not, ", ")
}

func (r *confRun) phaseDump(p int64) string {
	var b strings.Builder
	for _, s := range r.slots {
		fmt.Fprintf(&b, "\n  handler %d client-go: %v\n    want: %v", s.id, s.cgRec.phaseEvents(p), s.cgWant)
		if s.ourRec != nil {
			fmt.Fprintf(&b, "\n  handler %d ours: %v\n    want: %v", s.id, s.ourRec.phaseEvents(p), s.ourWant)
		}
	}
	return b.String()
}

// endPhase waits for quiescence, compares every handler's events of the
// phase, and starts the next phase.
func (r *confRun) endPhase() error {
	if err := r.waitQuiet(); err != nil {
		return err
	}
	p := r.phase.Load()
	for _, s := range r.slots {
		cgGot := confCanon(s.cgRec.phaseEvents(p), false)
		cgWant := confCanon(s.cgWant, false)
		var ourGot []string
		if s.ourRec != nil {
			ourGot = s.ourRec.phaseEvents(p)
			if r.kind == "warm restart" {
				var err error
				if ourGot, err = confWarmCanon(ourGot); err != nil {
					return fmt.Errorf("phase %d (%s): handler %d: %w", p, r.kind, s.id, err)
				}
			}
			ourGot = confCanon(ourGot, false)
		}
		ourWant := confCanon(s.ourWant, false)
		if r.ours == nil || s.removed {
			ourWant = nil
		}
		// Differential: in phases both informers lived through, ours must
		// tell each handler exactly what client-go told it.
		// A handler ours no longer marks for sync notifications (after a
		// warm start) misses, by design, the unchanged objects of a relist
		// that client-go's informer still sends it.
		if r.kind != "warm restart" && r.ours != nil && s.ourRec != nil {
			cgRef, what := cgGot, "client-go's informer"
			if !s.ourSyncing {
				cgRef, what = confWithoutSyncs(cgGot), "client-go's informer (less the unchanged objects of relists, which a warm-started informer sends only to handlers with a resync period)"
			}
			if d := confDiff(ourGot, cgRef); d != "" {
				return fmt.Errorf("phase %d (%s): handler %d: ours differs from %s: %s", p, r.kind, s.id, what, d)
			}
		}
		if d := confDiff(cgGot, cgWant); d != "" {
			return fmt.Errorf("phase %d (%s): handler %d: TEST MODEL disagrees with client-go's own informer (fix the test): %s", p, r.kind, s.id, d)
		}
		if d := confDiff(ourGot, ourWant); d != "" {
			return fmt.Errorf("phase %d (%s): handler %d: ours differs from client-go's semantics: %s", p, r.kind, s.id, d)
		}
	}
	if err := r.compareIndexes(); err != nil {
		return fmt.Errorf("phase %d (%s): %w", p, r.kind, err)
	}
	// Both have seen everything: the last event's or list's resourceVersion.
	want := strconv.Itoa(r.src.lastRV)
	if got := r.cg.LastSyncResourceVersion(); got != want {
		return fmt.Errorf("phase %d (%s): TEST MODEL: client-go's LastSyncResourceVersion %q, want %q", p, r.kind, got, want)
	}
	if got := r.ours.inf.LastSyncResourceVersion(); got != want {
		return fmt.Errorf("phase %d (%s): our LastSyncResourceVersion %q, want %q (client-go's: %q)", p, r.kind, got, want, r.cg.LastSyncResourceVersion())
	}
	for _, s := range r.slots {
		s.cgWant, s.ourWant = nil, nil
	}
	r.phase.Add(1)
	return nil
}

// compareIndexes checks the namespace index of both informers against the
// source.
func (r *confRun) compareIndexes() error {
	if r.ours == nil {
		return nil
	}
	want := map[string]confState{}
	for k, rv := range r.src.state() {
		ns, _, _ := strings.Cut(k, "/")
		if want[ns] == nil {
			want[ns] = confState{}
		}
		want[ns][k] = rv
	}
	for _, ns := range confNamespaces {
		for name, idx := range map[string]cache.Indexer{"client-go": r.cg.GetIndexer(), "ours": r.ours.inf.GetIndexer()} {
			objs, err := idx.ByIndex(cache.NamespaceIndex, ns)
			if err != nil {
				return fmt.Errorf("%s ByIndex(namespace, %s): %w", name, ns, err)
			}
			if got := confStateOf(objs); !confEqualState(got, want[ns]) && (len(got) != 0 || len(want[ns]) != 0) {
				return fmt.Errorf("%s ByIndex(namespace, %s) = %v, want %v", name, ns, got, want[ns])
			}
		}
	}
	return nil
}

// finish checks that nothing more came (endPhase's fence makes sure every
// event sent before it has arrived), and replays every handler's whole
// history for consistency.
func (r *confRun) finish() error {
	r.kind = "final"
	if err := r.endPhase(); err != nil {
		return err
	}
	final := r.src.state()
	for _, s := range r.slots {
		st, err := confReplay(s.cgRec.all())
		if err != nil {
			return fmt.Errorf("client-go handler %d: %w", s.id, err)
		}
		if !s.removed && !confEqualState(st, final) {
			return fmt.Errorf("client-go handler %d ends knowing %v, source holds %v", s.id, st, final)
		}
		if s.ourRec != nil {
			st, err := confReplay(s.ourRec.all())
			if err != nil {
				return fmt.Errorf("our handler %d (last incarnation): %w", s.id, err)
			}
			if !s.removed && !confEqualState(st, final) {
				return fmt.Errorf("our handler %d ends knowing %v, source holds %v", s.id, st, final)
			}
		}
	}
	return nil
}

func (r *confRun) stopAll() error {
	var errs []error
	if r.cgCancel != nil {
		r.cgCancel()
		select {
		case <-r.cgDone:
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("client-go's RunWithContext did not return"))
		}
	}
	if r.ours != nil {
		if _, err := r.ours.stop(); err != nil {
			errs = append(errs, err)
		}
		r.ours = nil
	}
	r.src.shutdown()
	return errors.Join(errs...)
}
