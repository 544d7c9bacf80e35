package simulation

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// recorder is an event handler that checks, as each notification arrives,
// that it is one client-go could deliver, and keeps the handler's view of
// the collection (key → the state it was last told) for the quiescent
// checks. A checkpoint's handler starts from the acknowledgements the
// simulation's model of the checkpoint (oracle_test.go) says the file holds
// instead of nothing: what it was told before the restart.
//
// Per key, a delivered state must be one the server wrote for that key,
// under that UID, and its resourceVersion must never go backwards within the
// process; a deletion must be of an object the server no longer has (its
// UID is gone: UIDs are never reused). A plain handler is also told
// adds only of keys it does not hold, and updates and deletions only of keys
// it holds, with the state it holds as the update's old. A checkpoint's
// handler may be told again what it holds (delivery is at least once) but
// never an initial add of a state it durably acknowledged.
type recorder struct {
	name       string
	srv        *Server
	checkpoint bool
	durable    map[string]string // checkpoint: acknowledgements certainly committed at start
	// maybe: held keys whose deletion, once the server lacks them, a
	// checkpoint's handler may not be told (the file may not hold them);
	// a notification of the key ends it.
	maybe map[string]bool

	mu         sync.Mutex
	view       map[string]Version
	seen       map[string]int64 // highest resourceVersion delivered per key
	violations []string
	// unacked are the objects (and deletions) a checkpoint's handler was
	// given and has not acknowledged, in order; given, every state given
	// per key, for stale acknowledgements.
	unacked []interface{}
	given   map[string][]*corev1.Pod
	events  int
	// inHandler, if set, acknowledges from the handler itself, as a
	// handler that does its work in place does, each notification pick
	// chooses (picked under mu, acknowledged without it).
	inHandler func(obj interface{})
	pick      func() bool
	// setAside, if set, reports whether the informer set stored state
	// aside since it started: its relist then adds stored keys again.
	setAside func() bool
}

var _ cache.ResourceEventHandler = (*recorder)(nil)

func newRecorder(name string, srv *Server) *recorder {
	return &recorder{name: name, srv: srv, view: map[string]Version{}, seen: map[string]int64{}, given: map[string][]*corev1.Pod{}}
}

// newCheckpointRecorder starts from the model's starting point of the
// checkpoint's handler (ckModel.start).
func newCheckpointRecorder(name string, srv *Server, st ckStart) *recorder {
	r := newRecorder(name, srv)
	r.checkpoint = true
	r.durable, r.view, r.maybe = st.durable, st.view, st.maybe
	return r
}

func (r *recorder) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf("handler %s: ", r.name)+fmt.Sprintf(format, args...))
}

// checkStateLocked checks that p is a state the server wrote for key, at
// or after what was delivered for it, and records it.
func (r *recorder) checkStateLocked(what, key string, p *corev1.Pod) int64 {
	rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
	if err != nil {
		r.violate("%s %s with resourceVersion %q", what, key, p.ResourceVersion)
		return 0
	}
	if st, ok := r.srv.StateAt(rv); !ok || st.Key != key || st.UID != p.UID || st.Deleted {
		r.violate("%s %s@%d (uid %s): not a state the server wrote for the key (%+v)", what, key, rv, p.UID, st)
	}
	if rv < r.seen[key] {
		r.violate("%s %s@%d: resourceVersion went backwards from %d", what, key, rv, r.seen[key])
	}
	r.seen[key] = max(r.seen[key], rv)
	return rv
}

func (r *recorder) OnAdd(obj interface{}, initial bool) {
	p := obj.(*corev1.Pod)
	key := p.Namespace + "/" + p.Name
	if r.onAdd(obj, p, key, initial) {
		r.inHandler(obj)
	}
}

// onAdd checks and records an add; it reports whether the handler
// acknowledges it in place.
func (r *recorder) onAdd(obj interface{}, p *corev1.Pod, key string, initial bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	delete(r.maybe, key)
	rv := r.checkStateLocked(fmt.Sprintf("add(initial=%v)", initial), key, p)
	if held, ok := r.view[key]; ok && !r.checkpoint {
		r.violate("add %s@%d of a key it holds (at %s)", key, rv, held)
	}
	if r.checkpoint && r.durable[key] == p.ResourceVersion {
		switch {
		case initial:
			r.violate("initial add %s@%d: acknowledged at that resourceVersion, must be skipped", key, rv)
		case r.setAside == nil || !r.setAside():
			// Only a warm start hands out a stored state unchanged, and
			// it does so as an initial add; a relist adds it again only
			// after a set-aside dropped it from the store.
			r.violate("add %s@%d (initial=false) of a stored state acknowledged at that resourceVersion: a warm start's initial add given as a later one", key, rv)
		}
	}
	r.view[key] = Version{UID: p.UID, RV: p.ResourceVersion}
	return r.gaveLocked(key, p, obj)
}

func (r *recorder) OnUpdate(oldObj, newObj interface{}) {
	old, p := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if r.onUpdate(old, p, newObj) {
		r.inHandler(newObj)
	}
}

// onUpdate checks and records an update; it reports whether the handler
// acknowledges it in place.
func (r *recorder) onUpdate(old, p *corev1.Pod, newObj interface{}) bool {
	key := p.Namespace + "/" + p.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	delete(r.maybe, key)
	rv := r.checkStateLocked("update", key, p)
	if !r.checkpoint {
		held, ok := r.view[key]
		switch {
		case !ok:
			r.violate("update %s -> %d of a key it does not hold", key, rv)
		case held.RV != old.ResourceVersion || held.UID != old.UID:
			r.violate("update %s: old is %s@%s, but it holds %s", key, old.UID, old.ResourceVersion, held)
		}
	}
	r.view[key] = Version{UID: p.UID, RV: p.ResourceVersion}
	return r.gaveLocked(key, p, newObj)
}

func (r *recorder) OnDelete(obj interface{}) {
	if r.onDelete(obj) {
		r.inHandler(obj)
	}
}

// onDelete checks and records a deletion; it reports whether the handler
// acknowledges it in place.
func (r *recorder) onDelete(obj interface{}) bool {
	var p *corev1.Pod
	var key string
	tombstone := false
	switch o := obj.(type) {
	case *corev1.Pod:
		p, key = o, o.Namespace+"/"+o.Name
	case cache.DeletedFinalStateUnknown:
		key, tombstone = o.Key, true
		p, _ = o.Obj.(*corev1.Pod)
	default:
		panic(fmt.Sprintf("OnDelete(%T)", obj))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	delete(r.maybe, key)
	what := "delete"
	if tombstone {
		what = "delete(DeletedFinalStateUnknown)"
	}
	if p != nil {
		if liveKey, live := r.srv.Live(p.UID); live {
			r.violate("%s %s@%s: a live object reported deleted (uid %s is %s at the server)", what, key, p.ResourceVersion, p.UID, liveKey)
		}
		if rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64); err == nil {
			if rv < r.seen[key] {
				r.violate("%s %s@%d: resourceVersion went backwards from %d", what, key, rv, r.seen[key])
			}
			r.seen[key] = max(r.seen[key], rv)
		}
	}
	if _, ok := r.view[key]; !ok && !r.checkpoint {
		desc := "no object"
		if p != nil {
			desc = fmt.Sprintf("uid %q rv %q", p.UID, p.ResourceVersion)
		}
		r.violate("%s %s (%s) of a key it does not hold", what, key, desc)
	}
	delete(r.view, key)
	if !r.checkpoint {
		return false
	}
	if r.inHandler != nil && r.pick() {
		return true
	}
	r.unacked = append(r.unacked, obj)
	return false
}

// gaveLocked records what a checkpoint's handler was given, and reports
// whether it acknowledges it in place; otherwise a later step may.
func (r *recorder) gaveLocked(key string, p *corev1.Pod, obj interface{}) bool {
	if !r.checkpoint {
		return false
	}
	r.given[key] = append(r.given[key], p)
	if r.inHandler != nil && r.pick() {
		return true
	}
	r.unacked = append(r.unacked, obj)
	return false
}

// takeViolations returns and forgets the violations seen so far.
func (r *recorder) takeViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.violations
	r.violations = nil
	return v
}

// diff describes how the handler's view differs from want; "" if equal. A
// key it may hold (maybe) and want lacks is not a difference.
func (r *recorder) diff(want map[string]Version) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	view := r.view
	if len(r.maybe) > 0 {
		view = maps.Clone(r.view)
		for k := range r.maybe {
			if _, ok := want[k]; !ok {
				delete(view, k)
			}
		}
	}
	return diffViews(view, want)
}

// settledMaybe ends maybe for the keys want (the server's objects at a
// settled point) holds: the handler has been given each of them or skipped
// it, and holds it whatever the file held.
func (r *recorder) settledMaybe(want map[string]Version) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.maybe {
		if _, ok := want[k]; ok {
			delete(r.maybe, k)
		}
	}
}

// takeToAck returns the notifications the handler got and has not
// acknowledged, choosing each with pick, and forgets those chosen.
func (r *recorder) takeToAck(pick func() bool) []interface{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out, keep []interface{}
	for _, o := range r.unacked {
		if pick() {
			out = append(out, o)
		} else {
			keep = append(keep, o)
		}
	}
	r.unacked = keep
	return out
}

// older returns a state of key given before its latest, if any: a stale
// acknowledgement's object.
func (r *recorder) older(key string) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.given[key]
	if len(g) < 2 {
		return nil
	}
	return g[0]
}

// diffViews describes how got differs from want, key by key.
func diffViews(got, want map[string]Version) string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := sortedKeys(keys)
	var out []string
	for _, k := range sorted {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case gok && !wok:
			out = append(out, fmt.Sprintf("%s: holds %s, server has none", k, g))
		case !gok && wok:
			out = append(out, fmt.Sprintf("%s: missing, server has %s", k, w))
		case g != w:
			out = append(out, fmt.Sprintf("%s: holds %s, server has %s", k, g, w))
		}
	}
	return strings.Join(out, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := slicesSorted(maps.Keys(m))
	return out
}

func slicesSorted(seq func(func(string) bool)) []string {
	var out []string
	seq(func(k string) bool { out = append(out, k); return true })
	sort.Strings(out)
	return out
}
