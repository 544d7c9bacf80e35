package simulation

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The differential mode runs client-go's own informer
// (cache.NewSharedIndexInformerWithOptions, with the same indexers) beside
// ours for as long as ours runs, with the same handlers, and compares each
// handler's notifications key by key at every settled point: kind (add,
// update, delete), the objects' UIDs and resourceVersions, isInInitialList,
// and a DeletedFinalStateUnknown against a plain deletion.
//
// Client-go's informer lists and watches a mirror: a second Server to
// which the driver repeats every change of the server (the same writes
// give the same UIDs and revisions), so each informer has watches of its
// own on the same history and injected errors reach ours alone. The
// mirror's watch cache is unbounded, its watches never end (an apiserver
// restart is repeated on it as the revisions other writers made, and a
// watch's end not at all), and it injects no errors: client-go never
// relists after its first list, so its stream is the ideal one. Its
// reflector relists after a watch that ends within a second with no event,
// and backs off 0.8 s and more before it: that would delay every step.
//
// Legitimate differences, each left out of the comparison:
//   - Across keys the two interleave as they will: notifications are
//     compared per key.
//   - Ours relists or recovers after a 410, a read error or a fault where
//     client-go watched on: a change found by a list reaches handlers as a
//     list's notification (a DeletedFinalStateUnknown for a deletion, one
//     update for a deletion and a creation of the key), which a watch
//     gives otherwise. A settled point's notifications are compared only
//     if neither informer made a list request (a full, metadata or
//     one-object list) since the one before. A list that brings a change
//     made since the last settled point was served after that change, so
//     it is counted before the change's settled point.
//   - A list a lagging cache served before such a change is counted
//     there too, but the watch from its revision may tell the change
//     after that settled point: ours' store equals the server's before
//     it has told an object's creation and deletion. The changes made up
//     to a settled point whose notifications were not compared are left
//     out of later comparisons (tapePair.forgone).
//   - A warm start gives the stored states as initial adds, then the
//     changes made while it was down; client-go lists the current states.
//     The notifications up to a start's settled point are compared only
//     for a start on a new file (a cold start), and only if no trigger
//     wrote meanwhile: the two initial lists are taken at different
//     moments, so a write between them is in one list and comes to the
//     other informer by its watch (isInInitialList false).
//   - After a relist, client-go gives every handler an update with an
//     unchanged resourceVersion for each unchanged object: its handlers
//     without a resync period count as resyncing until their first resync
//     check, which never comes. Ours does so after a cold start, and after
//     a warm start gives them only to handlers with a resync period
//     (docs/cache.md). Such an update changes no handler's view, so a
//     settled point does not wait for it: a relist made before one may
//     deliver it after it. Neither informer's are recorded.
//   - A handler that joins a running informer gets synthetic adds of what
//     each store holds at that moment, and the two stores need not be at
//     the same change then: its first segment is compared per key once
//     each drops its leading synthetic add, one a suffix of the other
//     (lateJoinDiffers).
//   - The checkpoint's handler has no counterpart in client-go.
//
// What client-go guarantees whatever the path is checked everywhere:
// after the settled point at which a handler joined, it never gets an add
// with isInInitialList true (client-go's RealFIFO sets it only until its
// initial list is processed, and gives a late handler's synthetic adds
// true).
type differential struct {
	mirror *Server
	// writes orders the driver's writes and triggers' (lockWrites).
	writes sync.Mutex
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}
	pairs  []*tapePair
	// lists counts both informers' list requests at the settled point
	// before, and rev is the server's revision then; cold says the span
	// began on a new file; moved is the server's count of triggers'
	// writes when it began.
	lists int
	rev   int64
	cold  bool
	moved int
}

// tapePair is one handler on both informers.
type tapePair struct {
	name      string
	ours, cg  *tape
	joinedNow bool // registered since the last settled point
	first     bool // this segment is the span's first (the start's)
	// joined is, for a handler that joined a running informer, each
	// informer's store resourceVersion just after it joined: every later
	// change is told to it as a change (ours, then client-go's).
	joined [2]int64
	// forgone is the server's revision at the latest settled point whose
	// notifications were not compared; 0 if none. Notifications of changes
	// made up to it are not compared later either.
	forgone int64
}

// tape records a handler's notifications per key, as tokens.
type tape struct {
	mu    sync.Mutex
	byKey map[string][]string
	// last is the resourceVersion of each key's latest notification, kept
	// across takes.
	last map[string]int64
}

func newTape() *tape { return &tape{byKey: map[string][]string{}, last: map[string]int64{}} }

// note records token for key; rv is the resourceVersion it tells of, ""
// if none.
func (t *tape) note(key, token, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byKey[key] = append(t.byKey[key], token)
	if n, err := strconv.ParseInt(rv, 10, 64); err == nil {
		t.last[key] = n
	}
}

// lastOf returns the resourceVersion of key's latest notification.
func (t *tape) lastOf(key string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last[key]
}

// take returns and forgets what was recorded.
func (t *tape) take() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.byKey
	t.byKey = map[string][]string{}
	return out
}

// putBack returns what take returned to the tape, before anything
// recorded since.
func (t *tape) putBack(taken map[string][]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, tokens := range taken {
		t.byKey[k] = append(slices.Clone(tokens), t.byKey[k]...)
	}
}

// taped is a handler that records to a tape, then to a recorder, which
// checks each notification. In that order: a settled point, which the
// recorder's view reveals, then finds the notification on the tape.
type taped struct {
	rec  *recorder
	tape *tape
}

func (h taped) OnAdd(obj interface{}, initial bool) {
	p := obj.(*corev1.Pod)
	h.tape.note(p.Namespace+"/"+p.Name, fmt.Sprintf("add %s@%s initial=%v", p.UID, p.ResourceVersion, initial), p.ResourceVersion)
	h.rec.OnAdd(obj, initial)
}

func (h taped) OnUpdate(oldObj, newObj interface{}) {
	old, p := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if old.ResourceVersion != p.ResourceVersion { // else a relist's update of an unchanged object
		h.tape.note(p.Namespace+"/"+p.Name, fmt.Sprintf("update %s@%s -> %s@%s", old.UID, old.ResourceVersion, p.UID, p.ResourceVersion), p.ResourceVersion)
	}
	h.rec.OnUpdate(oldObj, newObj)
}

func (h taped) OnDelete(obj interface{}) {
	defer h.rec.OnDelete(obj)
	switch o := obj.(type) {
	case *corev1.Pod:
		h.tape.note(o.Namespace+"/"+o.Name, fmt.Sprintf("delete %s@%s", o.UID, o.ResourceVersion), o.ResourceVersion)
	case cache.DeletedFinalStateUnknown:
		what, rv := "no object", ""
		if p, ok := o.Obj.(*corev1.Pod); ok && p != nil {
			what, rv = fmt.Sprintf("%s@%s", p.UID, p.ResourceVersion), p.ResourceVersion
		}
		h.tape.note(o.Key, "delete(DeletedFinalStateUnknown) "+what, rv)
	}
}

// diffInit creates the mirror, if the run is differential.
func (d *driver) diffInit() {
	if d.cfg.Differential {
		d.diff = &differential{mirror: NewServer(ServerOptions{Window: 1 << 30})}
		d.srv.onWrite = d.mirrorTrigger
		d.srv.writes = &d.diff.writes
	}
}

// lockWrites holds off triggers' writes until the returned func is called,
// so that a step's write reaches the server and the mirror in the same
// order relative to them: both give a write the next revision, and a
// trigger's write between a step's two would give each a different one.
func (d *driver) lockWrites() func() {
	if d.diff == nil {
		return func() {}
	}
	d.diff.writes.Lock()
	return d.diff.writes.Unlock
}

// mirrorTrigger repeats on the mirror what a trigger wrote on the server
// (faults_test.go), moving its revision as the server's moved.
func (d *driver) mirrorTrigger(do, key string, arg int) {
	m := d.diff.mirror
	switch do {
	case ActCreate:
		m.Create(key, arg)
	case ActUpdate:
		m.Update(key, arg)
	case ActDelete:
		m.Delete(key)
	case ActCompact:
		m.OtherWrites(1)
		m.Compact()
	case ActRestart:
		m.OtherWrites(1)
	}
}

// mirrorStep repeats on the mirror what step st changes on the server.
func (d *driver) mirrorStep(st Step) {
	if d.diff == nil {
		return
	}
	m := d.diff.mirror
	switch st.Op {
	case OpCreate:
		m.Create(st.Key, d.gen)
	case OpUpdate:
		m.Update(st.Key, d.gen)
	case OpDelete:
		m.Delete(st.Key)
	case OpRecreate:
		if m.Delete(st.Key) {
			m.Create(st.Key, d.gen)
		}
	case OpCreateRich:
		createRich(m, st.Key, d.gen, st.N, d.cfg)
	case OpOtherWrites:
		m.OtherWrites(st.N)
	case OpBookmark:
		m.Bookmark()
	case OpRestart:
		m.OtherWrites(st.N)
	case OpCompact:
		m.Compact()
	}
}

// mirrorBookmark sends the mirror's watches a bookmark, as the driver's
// waits do the server's.
func (d *driver) mirrorBookmark() {
	if d.diff != nil {
		d.diff.mirror.Bookmark()
	}
}

// listRequests counts both informers' list requests so far.
func (d *driver) listRequests() int {
	c := d.srv.Counts()
	return c[KindList] + c[KindMeta] + c[KindFetch] + d.diff.mirror.Counts()[KindList]
}

// diffStart starts client-go's informer beside ours, with the plain
// handler; cold says ours starts on a new file.
func (d *driver) diffStart(cold bool) error {
	if d.diff == nil {
		return nil
	}
	df := d.diff
	n := d.listRequests()
	df.lists, df.rev, df.cold, df.moved, df.pairs = n, d.srv.Revision(), cold, d.srv.Moved(), nil
	df.inf = cache.NewSharedIndexInformerWithOptions(df.mirror.ListerWatcher(), &corev1.Pod{}, cache.SharedIndexInformerOptions{Indexers: simIndexers()})
	_ = df.inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	if err := d.diffHandler("plain", true); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	df.cancel, df.done = cancel, make(chan struct{})
	go func() { defer close(df.done); df.inf.RunWithContext(ctx) }()
	return nil
}

// diffHandler registers on client-go's informer the counterpart of ours'
// handler name, which is registered next (handler).
func (d *driver) diffHandler(name string, first bool) error {
	df := d.diff
	if df == nil || df.inf == nil {
		return nil
	}
	r := newRecorder("client-go "+name, df.mirror)
	t := newTape()
	reg, err := df.inf.AddEventHandler(taped{rec: r, tape: t})
	if err != nil {
		return fmt.Errorf("client-go handler: %w", err)
	}
	d.plain = append(d.plain, r)
	d.regs[r] = reg
	df.pairs = append(df.pairs, &tapePair{name: name, ours: newTape(), cg: t, joinedNow: true, first: first,
		joined: [2]int64{math.MaxInt64, storeVersion(df.inf.GetIndexer())}})
	return nil
}

// diffJoined records that ours' handler name joined its running informer.
func (d *driver) diffJoined(name string) {
	if d.diff == nil || d.diff.inf == nil {
		return
	}
	for _, p := range d.diff.pairs {
		if p.name == name {
			p.joined[0] = storeVersion(d.inf.GetIndexer())
		}
	}
}

// storeVersion returns a store's resourceVersion; MaxInt64 if it does not
// say.
func storeVersion(idx cache.Indexer) int64 {
	rv, err := strconv.ParseInt(idx.LastStoreSyncResourceVersion(), 10, 64)
	if err != nil {
		return math.MaxInt64
	}
	return rv
}

// handler returns what to register on ours for recorder r: r itself, or r
// with the tape of its pair, registered on client-go's informer first.
func (d *driver) handler(r *recorder) cache.ResourceEventHandler {
	if d.diff == nil || d.diff.inf == nil {
		return r
	}
	for _, p := range d.diff.pairs {
		if p.name == r.name {
			return taped{rec: r, tape: p.ours}
		}
	}
	return r
}

// diffStop stops client-go's informer.
func (d *driver) diffStop() {
	if d.diff == nil || d.diff.inf == nil {
		return
	}
	d.diff.cancel()
	<-d.diff.done
	d.diff.inf = nil
}

// diffPending says what client-go's informer has not settled yet; its
// handlers are among the driver's recorders. Where the notifications
// since the last settled point will be compared (neither informer listed
// meanwhile), every handler registered then must also have been told of
// the latest change of every key changed since: a view equal to the
// server's does not show that a handler still has an object's creation
// and deletion to come, which its counterpart may have had already.
func (d *driver) diffPending() string {
	df := d.diff
	if df == nil || df.inf == nil {
		return ""
	}
	if !df.inf.HasSynced() {
		return "client-go's informer not synced"
	}
	if s := storeBehind(df.inf.GetIndexer(), df.mirror.LatestChange()); s != "" {
		return "client-go's " + s
	}
	if d.listRequests() != df.lists {
		return ""
	}
	changed := d.srv.ChangesSince(df.rev)
	for _, p := range df.pairs {
		if p.joinedNow && p.first {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(changed)) {
			for i, t := range []*tape{p.ours, p.cg} {
				// A handler that joined late was told the changes made
				// before it joined in its synthetic adds, or not at all.
				// While bookmarks are withheld, ours' store version may
				// lag what it applied (invariants_test.go): the join is unknown.
				if p.joinedNow && (changed[key] <= p.joined[i] || d.srv.Quiet()) {
					continue
				}
				if got := t.lastOf(key); got != changed[key] {
					return fmt.Sprintf("handler %s (%s) not told of %s@%d yet (told of @%d)", p.name, []string{"ours", "client-go's"}[i], key, changed[key], got)
				}
			}
		}
	}
	return ""
}

// diffSettled compares, at a settled point, what the handlers of both
// informers were told since the last one, and client-go's reads.
func (d *driver) diffSettled(pods map[string]*corev1.Pod, absent []string) error {
	df := d.diff
	if df == nil || df.inf == nil {
		return nil
	}
	if diff := diffViews(df.mirror.Objects(), d.srv.Objects()); diff != "" {
		return fmt.Errorf("the differential's mirror server diverged from the server (a change it does not repeat): %s", diff)
	}
	if s := checkReads(df.inf.GetIndexer(), pods, absent); s != "" {
		return fmt.Errorf("client-go's reads differ from the server (the read oracle asks what client-go does not answer): %s", s)
	}
	n, rev := d.listRequests(), d.srv.Revision()
	exact := n == df.lists
	type segment struct{ ours, cg map[string][]string }
	segs := make([]segment, len(df.pairs))
	for i, p := range df.pairs {
		segs[i] = segment{p.ours.take(), p.cg.take()}
	}
	if d.srv.Moved() != d.weak.waitMoved {
		// A trigger wrote while the checks read: the segments may hold
		// one informer's notifications of its write and not the other's.
		// They are compared, whole, at the next settled point.
		for i, p := range df.pairs {
			p.ours.putBack(segs[i].ours)
			p.cg.putBack(segs[i].cg)
		}
		return errInterrupted
	}
	df.lists, df.rev = n, rev
	var out []string
	for i, p := range df.pairs {
		ours, cg := segs[i].ours, segs[i].cg
		if !p.joinedNow {
			for who, got := range map[string]map[string][]string{"ours": ours, "client-go's": cg} {
				for key, tokens := range got {
					for _, tok := range tokens {
						if strings.HasSuffix(tok, "initial=true") {
							out = append(out, fmt.Sprintf("handler %s (%s): %s %s after the settled point it joined at: isInInitialList is true only for the initial list", p.name, who, key, tok))
						}
					}
				}
			}
		}
		compare := exact || (p.first && df.cold && d.srv.Moved() == df.moved)
		late := p.joinedNow && !p.first
		p.joinedNow, p.first = false, false
		if !compare {
			p.forgone = rev
			continue
		}
		keys := map[string]bool{}
		for k := range ours {
			keys[k] = true
		}
		for k := range cg {
			keys[k] = true
		}
		for _, k := range slicesSorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			if late {
				if s := lateJoinDiffers(ours[k], cg[k]); s != "" {
					out = append(out, fmt.Sprintf("handler %s (joined late), key %s: ours %v, client-go %v: %s", p.name, k, ours[k], cg[k], s))
				}
				continue
			}
			if !slices.Equal(after(ours[k], p.forgone), after(cg[k], p.forgone)) {
				out = append(out, fmt.Sprintf("handler %s, key %s: ours %v, client-go %v", p.name, k, ours[k], cg[k]))
			}
		}
	}
	if len(out) > 0 {
		return fmt.Errorf("differential: %s", strings.Join(out, "; "))
	}
	return nil
}

// after drops the tokens of changes made at or before revision rev.
func after(tokens []string, rev int64) []string {
	var out []string
	for _, tok := range tokens {
		if n := tokenVersion(tok); n == 0 || n > rev {
			out = append(out, tok)
		}
	}
	return out
}

// tokenVersion returns the resourceVersion a tape's token tells of (taped):
// the last one it names, the new object's in an update; 0 if none.
func tokenVersion(tok string) int64 {
	i := strings.LastIndexByte(tok, '@')
	if i < 0 {
		return 0
	}
	v, _, _ := strings.Cut(tok[i+1:], " ")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// lateJoinDiffers compares one key's notifications to a handler that
// joined a running informer, in ours and in client-go's; "" if they agree.
// Each informer gives the handler a synthetic add (isInInitialList true)
// of the key's state in its store when the handler joins, then the watch's
// changes after it (client-go shared_informer.go,
// AddEventHandlerWithOptions). The two stores need not be at the same
// change then: the one that joined earlier in the key's history tells the
// changes the other's synthetic add already holds, and one that held no
// state of the key gives no add. So, once each drops its leading
// synthetic add, one sequence must be a suffix of the other: the changes
// after the later join, the same in both. No add after the first is
// initial.
func lateJoinDiffers(ours, cg []string) string {
	rest := func(tokens []string) ([]string, string) {
		for i, tok := range tokens {
			if i > 0 && strings.HasSuffix(tok, "initial=true") {
				return nil, fmt.Sprintf("%s after the handler's synthetic add: isInInitialList is true only for the initial list", tok)
			}
		}
		if len(tokens) > 0 && strings.HasSuffix(tokens[0], "initial=true") {
			return tokens[1:], ""
		}
		return tokens, ""
	}
	o, s := rest(ours)
	if s != "" {
		return "ours gave " + s
	}
	c, s := rest(cg)
	if s != "" {
		return "client-go gave " + s
	}
	short, long := o, c
	if len(short) > len(long) {
		short, long = long, short
	}
	if !slices.Equal(short, long[len(long)-len(short):]) {
		return "after their synthetic adds, neither tells a suffix of the other's changes"
	}
	return ""
}
