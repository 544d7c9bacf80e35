package cache_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/utils/clock"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// This file holds the shared machinery of the conformance tests
// (conformance_*_test.go).
//
//   - A FakeControllerSource with a model of its contents.
//   - ListerWatchers that track their watches.
//   - Handlers that record what they are told.
//   - The models of what client-go's delta processing delivers.
//   - A pool that runs seeds.

var (
	confSeeds    = flag.Int("conformance.seeds", 200, "number of seeds TestConformance runs")
	confOnlySeed = flag.Int64("conformance.seed", -1, "run only this seed (reproduces a failure)")
	confParallel = flag.Int("conformance.parallel", 0, "seeds run at once; 0 chooses (16, or 12 under -race)")
	confVerbose  = flag.Bool("conformance.verbose", false, "log every seed's operations, not only failing ones")
)

// confSeedList returns the seeds to run: -conformance.seed alone, or
// 0..n-1.
func confSeedList(n int) []int64 {
	if *confOnlySeed >= 0 {
		return []int64{*confOnlySeed}
	}
	seeds := make([]int64, n)
	for i := range seeds {
		seeds[i] = int64(i)
	}
	return seeds
}

func confParallelism() int {
	if *confParallel > 0 {
		return *confParallel
	}
	if confRaceEnabled {
		return 12
	}
	return 16
}

// confRunSeeds runs fn for every seed on a pool of goroutines. The seeds
// mostly wait on informers and client-go's relist backoff, so they overlap
// well even on two cores. It reports each failing seed with the command
// that reproduces it. fn must not call t's Fatal methods. It returns an
// error instead.
func confRunSeeds(t *testing.T, name string, seeds []int64, fn func(seed int64, dir string, logf func(string, ...any)) error) {
	t.Helper()
	base := t.TempDir()
	type result struct {
		seed int64
		err  error
		log  []string
	}
	results := make([]result, len(seeds))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < confParallelism(); w++ {
		wg.Go(func() {
			for i := range work {
				seed := seeds[i]
				dir, err := os.MkdirTemp(base, fmt.Sprintf("seed%d-", seed))
				if err != nil {
					results[i] = result{seed: seed, err: err}
					continue
				}
				var log []string
				logf := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
				err = fn(seed, dir, logf)
				results[i] = result{seed: seed, err: err, log: log}
				_ = os.RemoveAll(dir)
			}
		})
	}
	start := time.Now()
	for i := range seeds {
		work <- i
	}
	close(work)
	wg.Wait()
	failed := 0
	for _, r := range results {
		if r.err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("seed %d: %v\noperations:\n  %s\nreproduce: go test ./cache -run '^%s$' -conformance.seed=%d -v",
					r.seed, r.err, strings.Join(r.log, "\n  "), name, r.seed)
			} else {
				t.Errorf("seed %d: %v (reproduce: go test ./cache -run '^%s$' -conformance.seed=%d -v)", r.seed, firstLine(r.err.Error()), name, r.seed)
			}
		} else if *confVerbose {
			t.Logf("seed %d:\n  %s", r.seed, strings.Join(r.log, "\n  "))
		}
	}
	t.Logf("%d seeds (%d failed) in %v, %d at a time", len(seeds), failed, time.Since(start).Round(time.Millisecond), confParallelism())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ---------------------------------------------------------------------------
// The source: FakeControllerSource plus a model of its contents.

// confSource wraps a FakeControllerSource with a model of its objects and
// resourceVersions. The fake honours resourceVersions on Watch, and answers
// 410 for history flushed by ResetWatch. confSource also keeps the
// bookkeeping the tests need to know which watches are attached to the live
// broadcaster.
type confSource struct {
	fake *fcache.FakeControllerSource

	// genMu serializes Watch requests with ResetWatch, so each watch knows
	// the broadcaster generation it is attached to.
	genMu sync.Mutex
	gen   int

	// The fields below belong to the goroutine driving the test.
	objs    map[string]*corev1.Pod // key → last written object (never mutated)
	lastRV  int                    // resourceVersion of the latest change
	resetRV int                    // lastRV at the latest ResetWatch
}

func newConfSource() *confSource {
	return &confSource{fake: fcache.NewFakeControllerSource(), objs: map[string]*corev1.Pod{}}
}

// confChange is one change made to the source.
type confChange struct {
	typ        watch.EventType
	key        string
	rv, oldRV  string
	watchEvent string // what a handler sees when the change arrives by watch
}

// change records a change on the fake, which sets p's resourceVersion and,
// if broadcast, sends it to the current watchers. p must not be mutated
// afterwards: the fake keeps it and hands it to watchers.
func (s *confSource) change(typ watch.EventType, p *corev1.Pod, broadcast bool) confChange {
	key := p.Namespace + "/" + p.Name
	old := s.objs[key]
	prob := 0.0
	if broadcast {
		prob = 1
	}
	s.fake.Change(watch.Event{Type: typ, Object: p}, prob)
	s.lastRV++
	c := confChange{typ: typ, key: key, rv: p.ResourceVersion}
	if c.rv != strconv.Itoa(s.lastRV) {
		panic(fmt.Sprintf("fake source set resourceVersion %s, model expected %d", c.rv, s.lastRV))
	}
	if old != nil {
		c.oldRV = old.ResourceVersion
	}
	switch typ {
	case watch.Added:
		if old != nil {
			panic("test bug: Added for an existing key " + key)
		}
		s.objs[key] = p.DeepCopy()
		c.watchEvent = confAddEvent(key, c.rv, false)
	case watch.Modified:
		s.objs[key] = p.DeepCopy()
		c.watchEvent = confUpdateEvent(key, c.oldRV, c.rv)
	case watch.Deleted:
		delete(s.objs, key)
		c.watchEvent = confDeleteEvent(key, c.rv)
	}
	return c
}

// The fence object is a Pod in a namespace of its own, so that adding it
// never collides with a random change. A random change may still modify or
// delete it, since it is an object like the others.
const confFenceNamespace, confFenceName = "conf-fence", "fence"

// confFence adds, or else modifies, the fence object by watch, and returns
// the event handlers get for it. Handlers get events in the order the source
// made them. So one that has recorded the fence has recorded every earlier
// change. Tests wait for it instead of sleeping for stragglers.
func confFence(src *confSource) string {
	typ := watch.Added
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: confFenceNamespace, Name: confFenceName}}
	if old, ok := src.objs[confFenceNamespace+"/"+confFenceName]; ok {
		typ, p = watch.Modified, old.DeepCopy()
	}
	return src.change(typ, p, true).watchEvent
}

// resetWatch closes every watch and flushes the fake's history: a later
// watch from an older resourceVersion gets 410 Gone.
func (s *confSource) resetWatch() {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	s.fake.ResetWatch()
	s.gen++
	s.resetRV = s.lastRV
}

// shutdown stops the fake's broadcaster goroutine. Call it only once no
// informer uses the source any more.
func (s *confSource) shutdown() {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	s.fake.Broadcaster.Shutdown()
}

func (s *confSource) generation() int {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	return s.gen
}

// resumeExpires reports whether a watch from rv now gets 410 from the fake.
// The fake keeps the changes since the latest ResetWatch. Off by one, it
// also refuses a watch from exactly the version before the oldest of them.
func (s *confSource) resumeExpires(rv int) bool {
	return rv < s.lastRV && rv <= s.resetRV
}

// state returns key → resourceVersion of the source's objects.
func (s *confSource) state() confState {
	st := confState{}
	for k, p := range s.objs {
		st[k] = p.ResourceVersion
	}
	return st
}

// list is the fake's List with the items in key order, as an apiserver
// returns them (the fake iterates a map), so that both informers see the
// same list order.
func (s *confSource) list(opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := s.fake.List(opts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	sort.Slice(items, func(i, j int) bool { return confKey(items[i]) < confKey(items[j]) })
	listMeta, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, err
	}
	out := &corev1.List{ListMeta: metav1.ListMeta{ResourceVersion: listMeta.GetResourceVersion()}}
	if err := meta.SetList(out, items); err != nil {
		return nil, err
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// The ListerWatcher each informer uses.

// confLW is one informer's ListerWatcher over a confSource. It reports
// watch-list semantics unsupported (client-go's reflector would otherwise
// try a streaming list the fake does not implement) and tracks the watches
// it handed out.
type confLW struct {
	src *confSource

	mu      sync.Mutex
	watches []*confWatch
	lists   int
	expired int // watch requests answered with an error
	// gate, when set, holds the next Watch request until it is closed;
	// listGate does the same for the next List request.
	gate, listGate chan struct{}
	// listHeld counts List requests that reached a listGate.
	listHeld int
}

var _ cache.ListerWatcher = (*confLW)(nil)

func newConfLW(src *confSource) *confLW { return &confLW{src: src} }

func (l *confLW) IsWatchListSemanticsUnSupported() bool { return true }

func (l *confLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	gate := l.listGate
	l.listGate = nil
	if gate != nil {
		l.listHeld++
	}
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.mu.Lock()
	l.lists++
	l.mu.Unlock()
	return l.src.list(opts)
}

func (l *confLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	gate := l.gate
	l.gate = nil
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.src.genMu.Lock()
	inner, err := l.src.fake.Watch(opts)
	gen := l.src.gen
	l.src.genMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.expired++
		return nil, err
	}
	w := &confWatch{inner: inner, out: make(chan watch.Event), stopped: make(chan struct{}), gen: gen, rv: opts.ResourceVersion}
	go w.run()
	l.watches = append(l.watches, w)
	return w, nil
}

// setGate makes the next Watch request wait until the returned function is
// called.
func (l *confLW) setGate() (release func()) {
	g := make(chan struct{})
	l.mu.Lock()
	l.gate = g
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

// setListGate makes the next List request wait until the returned function
// is called.
func (l *confLW) setListGate() (release func()) {
	g := make(chan struct{})
	l.mu.Lock()
	l.listGate = g
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

// listsHeld returns how many List requests have reached a list gate.
func (l *confLW) listsHeld() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listHeld
}

// active returns the open watch attached to the live broadcaster, or nil.
func (l *confLW) active() *confWatch {
	gen := l.src.generation()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.watches) - 1; i >= 0; i-- {
		if w := l.watches[i]; w.gen == gen && !w.closed.Load() {
			return w
		}
	}
	return nil
}

func (l *confLW) counts() (lists, watches, expired int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lists, len(l.watches), l.expired
}

// confWatch forwards a fake watch and counts its events. The test thus
// knows whether a watch is still open and whether it ever delivered an
// event. client-go relists after a watch that closes within a second with
// no events, where ours watches again.
type confWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stopped  chan struct{}
	stopOnce sync.Once
	gen      int
	rv       string
	events   atomic.Int64
	closed   atomic.Bool
}

func (w *confWatch) run() {
	defer close(w.out)
	defer w.closed.Store(true)
	for {
		select {
		case <-w.stopped:
			return
		case e, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			w.events.Add(1)
			select {
			case w.out <- e:
			case <-w.stopped:
				return
			}
		}
	}
}

func (w *confWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *confWatch) Stop() {
	w.stopOnce.Do(func() {
		w.closed.Store(true)
		close(w.stopped)
		w.inner.Stop()
	})
}

// ---------------------------------------------------------------------------
// Events as handlers see them.

// confState maps object keys to resourceVersions.
type confState map[string]string

func (s confState) keys() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s confState) String() string {
	var b strings.Builder
	for i, k := range s.keys() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "@" + s[k])
	}
	return "{" + b.String() + "}"
}

func confStateOf(objs []interface{}) confState {
	st := confState{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			st[fmt.Sprintf("<%T>", o)] = "?"
			continue
		}
		st[confKey(o)] = m.GetResourceVersion()
	}
	return st
}

func confKey(obj interface{}) string {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return fmt.Sprintf("<bad key %T: %v>", obj, err)
	}
	return key
}

func confAddEvent(key, rv string, initial bool) string {
	return fmt.Sprintf("add %s@%s initial=%t", key, rv, initial)
}

func confUpdateEvent(key, oldRV, newRV string) string {
	return fmt.Sprintf("update %s %s->%s", key, oldRV, newRV)
}

func confDeleteEvent(key, rv string) string { return fmt.Sprintf("delete %s@%s", key, rv) }

func confTombstoneEvent(key, rv string) string {
	return fmt.Sprintf("delete-unknown %s@%s", key, rv)
}

// confInitialEvents are the adds a handler gets for state as part of an
// initial list (or a warm start, or a late join), in key order.
func confInitialEvents(st confState) []string {
	out := make([]string, 0, len(st))
	for _, k := range st.keys() {
		out = append(out, confAddEvent(k, st[k], true))
	}
	return out
}

// confRelistEvent is one handler call client-go's processReplacedAllInfo
// makes for a relist.
type confRelistEvent struct {
	event     string
	unchanged bool // an update with an unchanged resourceVersion: a sync, not for every handler
}

// confRelistEvents is what a relist that finds final in a store holding
// known produces. First comes DeletedFinalStateUnknown for each known key
// the list lacks, in no particular order, since client-go iterates a map.
// Then, in list (key) order, come an update for each key in both and an
// add (isInInitialList=false) for each new key.
func confRelistEvents(known, final confState) []confRelistEvent {
	var out []confRelistEvent
	for _, k := range known.keys() {
		if _, ok := final[k]; !ok {
			out = append(out, confRelistEvent{event: confTombstoneEvent(k, known[k])})
		}
	}
	for _, k := range final.keys() {
		if old, ok := known[k]; ok {
			out = append(out, confRelistEvent{event: confUpdateEvent(k, old, final[k]), unchanged: old == final[k]})
		} else {
			out = append(out, confRelistEvent{event: confAddEvent(k, final[k], false)})
		}
	}
	return out
}

// confCanon normalizes what client-go itself leaves unordered. It sorts
// runs of initial adds. A late joiner's synthetic adds come from a map, and
// a warm start replays the file in key order. It sorts runs of relist
// tombstones, since reconcileReplacement iterates a map. With syncs set, it
// also sorts runs of unchanged-resourceVersion updates. A resync walks the
// store, a map. Everything else keeps its order.
func confCanon(events []string, syncs bool) []string {
	out := append([]string(nil), events...)
	class := func(s string) string {
		switch {
		case strings.HasPrefix(s, "add ") && strings.HasSuffix(s, " initial=true"):
			return "initial"
		case strings.HasPrefix(s, "delete-unknown "):
			return "tombstone"
		case syncs && confIsSync(s):
			return "sync"
		}
		return ""
	}
	for i := 0; i < len(out); {
		c := class(out[i])
		j := i + 1
		if c != "" {
			for j < len(out) && class(out[j]) == c {
				j++
			}
			sort.Strings(out[i:j])
		}
		i = j
	}
	return out
}

// confWarmCanon checks the ordering a warm start promises its handlers
// while it hands the stored state out in the background. Each key's initial
// add comes once and before every other event for that key. Events keep
// their order. confWarmCanon then moves the initial adds to the front,
// where a list would have put them. So the rest compares as for a cold
// start.
func confWarmCanon(events []string) ([]string, error) {
	seen := map[string]int{} // key -> index of its first event
	var initial, rest []string
	for i, e := range events {
		key := confEventKey(e)
		if strings.HasPrefix(e, "add ") && strings.HasSuffix(e, " initial=true") {
			if j, ok := seen[key]; ok {
				return nil, fmt.Errorf("initial add %q (event %d) comes after %q (event %d): a key's initial add must precede every other event for it\n  events: %v", e, i, events[j], j, events)
			}
			initial = append(initial, e)
		} else {
			rest = append(rest, e)
		}
		if _, ok := seen[key]; !ok {
			seen[key] = i
		}
	}
	return append(initial, rest...), nil
}

// confEventKey returns the object key of an event string (see
// confAddEvent and the others).
func confEventKey(e string) string {
	f := strings.Fields(e)
	if len(f) < 2 {
		return e
	}
	key, _, _ := strings.Cut(f[1], "@")
	return key
}

func confWithoutSyncs(events []string) []string {
	var out []string
	for _, e := range events {
		if !confIsSync(e) {
			out = append(out, e)
		}
	}
	return out
}

// confIsSync reports whether an event string is an update that kept its
// resourceVersion.
func confIsSync(s string) bool {
	if !strings.HasPrefix(s, "update ") {
		return false
	}
	f := strings.Fields(s)
	if len(f) != 3 {
		return false
	}
	rvs := strings.SplitN(f[2], "->", 2)
	return len(rvs) == 2 && rvs[0] == rvs[1]
}

// confDiff describes how got differs from want (both canonical).
func confDiff(got, want []string) string {
	var b strings.Builder
	n := max(len(got), len(want))
	first := -1
	for i := 0; i < n; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w && first < 0 {
			first = i
		}
	}
	if first < 0 {
		return ""
	}
	fmt.Fprintf(&b, "first difference at event %d (got %d events, want %d)\n", first, len(got), len(want))
	lo := max(0, first-3)
	for i := lo; i < n && i < first+12; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := "  "
		if g != w {
			mark = "!!"
		}
		fmt.Fprintf(&b, "    %s %3d got %-40s want %s\n", mark, i, g, w)
	}
	return b.String()
}

// confRecorder is a handler that records what it is told, tagged with the
// test's phase at the time of the call.
type confRecorder struct {
	name  string
	phase *atomic.Int64
	// transformed: every object must carry confTransformAnnotation.
	transformed bool

	mu     sync.Mutex
	events []confRecorded
}

type confRecorded struct {
	phase int64
	event string
	// For replay: kind is 'a', 'u', 'd' or 't' (tombstone).
	kind            byte
	key, rv, oldRV  string
	isInInitialList bool
}

var _ cache.ResourceEventHandler = (*confRecorder)(nil)

func newConfRecorder(name string, phase *atomic.Int64, transformed bool) *confRecorder {
	return &confRecorder{name: name, phase: phase, transformed: transformed}
}

func (r *confRecorder) check(obj interface{}) string {
	if !r.transformed {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetAnnotations()[confTransformAnnotation] == "" {
		return " !untransformed"
	}
	return ""
}

func (r *confRecorder) record(e confRecorded) {
	e.phase = r.phase.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *confRecorder) OnAdd(obj interface{}, isInInitialList bool) {
	key, rv := confKey(obj), confRV(obj)
	r.record(confRecorded{event: confAddEvent(key, rv, isInInitialList) + r.check(obj), kind: 'a', key: key, rv: rv, isInInitialList: isInInitialList})
}

func (r *confRecorder) OnUpdate(old, new interface{}) {
	key, rv, oldRV := confKey(new), confRV(new), confRV(old)
	ev := confUpdateEvent(key, oldRV, rv) + r.check(old) + r.check(new)
	if k := confKey(old); k != key {
		ev += " !old-key=" + k
	}
	r.record(confRecorded{event: ev, kind: 'u', key: key, rv: rv, oldRV: oldRV})
}

func (r *confRecorder) OnDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		rv, extra := "<nil>", ""
		if tomb.Obj != nil {
			rv = confRV(tomb.Obj)
			extra = r.check(tomb.Obj)
			if k := confKey(tomb.Obj); k != tomb.Key {
				extra += " !obj-key=" + k
			}
		}
		r.record(confRecorded{event: confTombstoneEvent(tomb.Key, rv) + extra, kind: 't', key: tomb.Key, rv: rv})
		return
	}
	key, rv := confKey(obj), confRV(obj)
	r.record(confRecorded{event: confDeleteEvent(key, rv) + r.check(obj), kind: 'd', key: key, rv: rv})
}

func confRV(obj interface{}) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("<%T>", obj)
	}
	return m.GetResourceVersion()
}

// phaseEvents returns the events recorded during phase p.
func (r *confRecorder) phaseEvents(p int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.phase == p {
			out = append(out, e.event)
		}
	}
	return out
}

func (r *confRecorder) phaseCount(p int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.phase == p {
			n++
		}
	}
	return n
}

func (r *confRecorder) all() []confRecorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]confRecorded(nil), r.events...)
}

// confReplay applies a handler's whole event history to an empty state. It
// checks that each call is consistent with what came before. An add must be
// for a key the handler does not know. An update or delete must be for a
// key it knows. An update's old object must be the one it last saw. It
// returns the state the handler has been told about.
func confReplay(events []confRecorded) (confState, error) {
	st := confState{}
	for i, e := range events {
		cur, known := st[e.key]
		switch e.kind {
		case 'a':
			if known {
				return st, fmt.Errorf("event %d %q: add for %s, which the handler already has at %s (duplicate delivery)", i, e.event, e.key, cur)
			}
			st[e.key] = e.rv
		case 'u':
			if !known {
				return st, fmt.Errorf("event %d %q: update for %s, which the handler does not have", i, e.event, e.key)
			}
			if cur != e.oldRV {
				return st, fmt.Errorf("event %d %q: update's old object is at %s, the handler last saw %s", i, e.event, e.oldRV, cur)
			}
			st[e.key] = e.rv
		case 'd':
			if !known {
				return st, fmt.Errorf("event %d %q: delete for %s, which the handler does not have", i, e.event, e.key)
			}
			delete(st, e.key)
		case 't':
			if !known {
				return st, fmt.Errorf("event %d %q: tombstone for %s, which the handler does not have", i, e.event, e.key)
			}
			if cur != e.rv {
				return st, fmt.Errorf("event %d %q: tombstone carries %s, the handler last saw %s", i, e.event, e.rv, cur)
			}
			delete(st, e.key)
		}
	}
	return st, nil
}

const confTransformAnnotation = "conformance.boltinformer.io/transformed"

// confTransform marks objects; it copies them, because the fake broadcasts
// one object to every watcher.
func confTransform(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Annotations[confTransformAnnotation] != "" {
		return obj, nil
	}
	p = p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[confTransformAnnotation] = "yes"
	return p, nil
}

// ---------------------------------------------------------------------------
// Our informer, stopped and restarted on its file.

// confOurs is one incarnation of our informer on the seed's cache file.
type confOurs struct {
	db     *persist.DB
	inf    *bcache.Informer
	lw     *confLW
	cancel context.CancelFunc
	done   chan struct{}
}

type confOursOptions struct {
	path          string
	batchInterval time.Duration
	cacheObjects  int
	resync        time.Duration
	clock         clock.WithTicker
	transform     bool
	backoff       time.Duration
	// syncedAtOpen is InformerOptions.SyncedAtOpen.
	syncedAtOpen bool
	// pageSize is InformerOptions.PageSize: a cold start's pages.
	pageSize int64
}

func openConfOurs(src *confSource, o confOursOptions) (*confOurs, error) {
	db, err := persist.Open(o.path, persist.Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: o.batchInterval})
	if err != nil {
		return nil, fmt.Errorf("open cache file: %w", err)
	}
	backoff := o.backoff
	if backoff == 0 {
		backoff = 5 * time.Millisecond
	}
	lw := newConfLW(src)
	inf, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, bcache.InformerOptions{
		Persistence:    bcache.Persistence{DB: db, Collection: "pods", CacheObjects: o.cacheObjects},
		ResyncPeriod:   o.resync,
		Indexers:       cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		Clock:          o.clock,
		InitialBackoff: backoff,
		MaxBackoff:     10 * backoff,
		SyncedAtOpen:   o.syncedAtOpen,
		PageSize:       o.pageSize,
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("NewSharedIndexInformerWithOptions: %w", err)
	}
	if o.transform {
		if err := inf.SetTransform(confTransform); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	// Expected 410s and closed watches are not worth a log line.
	_ = inf.SetWatchErrorHandler(func(*cache.Reflector, error) {})
	return &confOurs{db: db, inf: inf, lw: lw}, nil
}

func (o *confOurs) run() {
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	o.done = make(chan struct{})
	go func() {
		defer close(o.done)
		o.inf.RunWithContext(ctx)
	}()
}

// stop stops the informer, waits for RunWithContext to return, and closes
// the file. It returns the resourceVersion the file holds.
func (o *confOurs) stop() (string, error) {
	if o.cancel != nil {
		o.cancel()
		select {
		case <-o.done:
		case <-time.After(30 * time.Second):
			return "", errors.New("our RunWithContext did not return within 30s of cancellation")
		}
		if !o.inf.IsStopped() {
			return "", errors.New("IsStopped is false after RunWithContext returned")
		}
	}
	rv := o.inf.Indexer().LastStoreSyncResourceVersion()
	if err := o.db.Close(); err != nil {
		return rv, fmt.Errorf("close cache file: %w", err)
	}
	return rv, nil
}

func confEventStrings(evs []confRecorded) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.event
	}
	return out
}

func confEqualState(a, b confState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
