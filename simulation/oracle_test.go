package simulation

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ckModel is the simulation's own record of the checkpoint "sim": what its
// handler acknowledged, and which of it the file must, may or cannot hold.
// It never reads the file under test; the file's checkpoint is read only
// to cross-check the model (crossCheck).
//
// Per key the checkpoint is in one of three states (persist/checkpoint.go):
// acknowledged at a resourceVersion, a tombstone (a deleted object whose
// deletion is not acknowledged), or nothing. The model tells apart an
// acknowledgement of a state of the object the key holds and a stale one,
// of an object it no longer holds (deleted, or replaced under a new UID):
// persist treats both as acknowledgements, the handler sees the stale one
// as a tombstone (observed). The model keeps, per key, the set of states
// the checkpoint may be in: a set, because some outcomes depend on timing
// the simulation cannot see (whether a commit ran before a crash, whether a
// change came by watch or by list) or on rules it does not reproduce (a
// damaged file's set-aside).
//
// Transitions are recorded in order, each with a sequence number: the
// handler's acknowledgements as Ack returns, deletions of acknowledged keys
// at the settled point that follows them, Clear, and damage. A transition
// is durable once a commit that began after it has completed. The commit
// observer sees commits end: a successful commit that follows another
// observed commit began after that one ended, so every transition recorded
// before the earlier observation is durable. A Flush that returns nil makes
// durable what was recorded before it was called, and a clean Close all.
//
// At a crash the file holds the state after some prefix of the transitions
// not known durable, so the key's possible states are the union over those
// prefixes. A start on a new file (a cold start) holds nothing.
//
// The file is compared as the handler will see it (observed). A stale
// acknowledgement can never skip an initial add again, and its key's
// deletion is told as a tombstone's is: it counts as a tombstone. So the
// model need not follow persist where a commit writes only a layer's net
// change: an object deleted and created again between two commits leaves
// its acknowledgement on disk where memory holds a tombstone.
type ckModel struct {
	srv *Server

	mu  sync.Mutex
	seq int64 // transitions recorded
	// lastObs is seq when the commit observer last ran; -1 before the
	// first commit of the open file.
	lastObs int64
	// base holds each key's possible durable states before pending; a key
	// missing holds nothing for certain.
	base    map[string]ckSet
	pending []ckTransition
	// frozen: a crash image was taken (midop_test.go); the file will hold only
	// what was durable then, so later commits and flushes make nothing
	// durable. closed ends it.
	frozen bool
	// settledAt is the server's revision at the latest settled point of
	// the running informer, 0 before its first: its store holds a state at
	// or after it.
	settledAt int64

	// listed says whether the file holds the collection's resourceVersion.
	// A start without one is cold, and a cold start drops every checkpoint
	// (cache's emptyForColdStart). A handler that acknowledges as it is
	// given objects does so during a cold list too, before the list's
	// version is stored.
	listed ckListed
	// startedWith is listed when the running informer started; syncMark
	// is the sequence number of the transition recorded once it was seen
	// synced (its list's version applied before), -1 before that.
	startedWith ckListed
	syncMark    int64
	// durableUpTo: every transition up to it is durable.
	durableUpTo int64
}

// ckListed is what the model knows of the file's resourceVersion.
type ckListed uint8

const (
	listedNo    ckListed = iota // none: the next start is cold
	listedMaybe                 // the next start may be cold
	listedYes                   // the next start is warm (unless damage says otherwise)
)

type ckKind uint8

const (
	ckNone  ckKind = iota // nothing acknowledged
	ckAcked               // acknowledged at rv, a state of the object the key holds
	ckStale               // acknowledged at rv, a state of an object the key no longer holds
	ckTomb                // a tombstone
	// ckTombAcked: a tombstone in memory, and on disk the acknowledgement
	// at rv of the state the key holds, which the next open loads (see
	// damaged).
	ckTombAcked
)

type ckState struct {
	kind ckKind
	rv   string
}

func (s ckState) String() string {
	switch s.kind {
	case ckAcked:
		return "acked@" + s.rv
	case ckStale:
		return "stale@" + s.rv
	case ckTomb:
		return "tombstone"
	case ckTombAcked:
		return "tombstone+acked@" + s.rv
	}
	return "nothing"
}

// holds reports whether the handler, starting from s, holds the key: it
// must be told of the key's deletion.
func (s ckState) holds() bool { return s.kind != ckNone }

type ckSet map[ckState]struct{}

func setOf(states ...ckState) ckSet {
	out := ckSet{}
	for _, s := range states {
		out[s] = struct{}{}
	}
	return out
}

func (s ckSet) String() string {
	var out []string
	for st := range s {
		out = append(out, st.String())
	}
	sort.Strings(out)
	return "{" + strings.Join(out, ", ") + "}"
}

// ckTransition changes one key's state (key set) or every key's.
type ckTransition struct {
	seq  int64
	key  string
	step func(key string, s ckState) []ckState
}

var (
	none = ckState{kind: ckNone}
	tomb = ckState{kind: ckTomb}
)

func newCkModel(srv *Server) *ckModel {
	return &ckModel{srv: srv, lastObs: -1, base: map[string]ckSet{}, syncMark: -1}
}

// record appends a transition and returns its sequence number.
func (m *ckModel) record(key string, step func(key string, s ckState) []ckState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.pending = append(m.pending, ckTransition{seq: m.seq, key: key, step: step})
}

// apply returns the states set can reach by t.
func (t ckTransition) apply(key string, set ckSet) ckSet {
	if t.key != "" && t.key != key {
		return set
	}
	out := ckSet{}
	for s := range set {
		for _, n := range t.step(key, s) {
			out[n] = struct{}{}
		}
	}
	return out
}

func (m *ckModel) baseLocked(key string) ckSet {
	if set, ok := m.base[key]; ok {
		return set
	}
	return setOf(none)
}

// keysLocked returns every key the model has a state for.
func (m *ckModel) keysLocked() []string {
	set := map[string]bool{}
	for k := range m.base {
		set[k] = true
	}
	for _, t := range m.pending {
		if t.key != "" {
			set[t.key] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// currentLocked returns the states key may be in once every transition
// recorded has reached the file.
func (m *ckModel) currentLocked(key string) ckSet {
	set := m.baseLocked(key)
	for _, t := range m.pending {
		set = t.apply(key, set)
	}
	return set
}

// possibleLocked returns the states the file may hold for key after a
// crash now: the state after any prefix of the pending transitions.
func (m *ckModel) possibleLocked(key string) ckSet {
	set := m.baseLocked(key)
	all := maps.Clone(set)
	for _, t := range m.pending {
		set = t.apply(key, set)
		maps.Copy(all, set)
	}
	return all
}

// durableLocked makes every transition recorded up to seq durable.
func (m *ckModel) durableLocked(seq int64) {
	n := 0
	for n < len(m.pending) && m.pending[n].seq <= seq {
		n++
	}
	if n == 0 {
		return
	}
	m.durableUpTo = max(m.durableUpTo, seq)
	done := m.pending[:n]
	keys := m.keysLocked()
	for _, k := range keys {
		set := m.baseLocked(k)
		for _, t := range done {
			set = t.apply(k, set)
		}
		m.base[k] = set
	}
	m.pending = slices.Clone(m.pending[n:])
}

// observeCommit is the commit observer: see ckModel.
func (m *ckModel) observeCommit(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen {
		return
	}
	if ok && m.lastObs >= 0 {
		m.durableLocked(m.lastObs)
	}
	m.lastObs = m.seq
}

// mark returns the sequence number of the latest transition, for flushed.
func (m *ckModel) mark() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq
}

// flushed records that a Flush called at mark returned nil.
func (m *ckModel) flushed(mark int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen {
		return
	}
	m.durableLocked(mark)
}

// closed records the end of an open file: cleanly (every transition
// durable) or at a crash (any prefix of those not known durable).
func (m *ckModel) closed(clean bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keysLocked() {
		set := m.possibleLocked(k)
		if clean {
			set = m.currentLocked(k)
		}
		// The next open loads the acknowledgement on disk, not the
		// tombstone memory held.
		out := ckSet{}
		for s := range set {
			if s.kind == ckTombAcked {
				s.kind = ckAcked
			}
			out[s] = struct{}{}
		}
		m.base[k] = out
	}
	switch {
	case m.startedWith == listedYes:
		// A warm start keeps the version it found.
	case m.syncMark >= 0 && (clean || m.durableUpTo >= m.syncMark):
		m.listed = listedYes
	default:
		// Synced unseen, or not known to be committed: the list's version
		// may have reached the file, or not.
		m.listed = listedMaybe
	}
	m.pending, m.lastObs, m.frozen, m.settledAt, m.syncMark = nil, -1, false, 0, -1
}

// starting records an informer's start on the file. One that may find no
// resourceVersion may start cold, which drops every acknowledgement.
func (m *ckModel) starting() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listed == listedMaybe {
		for k, set := range m.base {
			set = maps.Clone(set)
			set[none] = struct{}{}
			m.base[k] = set
		}
	}
	m.startedWith, m.syncMark = m.listed, -1
}

// synced records that the running informer was seen synced: its list's
// resourceVersion was applied before now, and is durable once what is
// recorded now is.
func (m *ckModel) synced() {
	m.mu.Lock()
	seen := m.syncMark >= 0
	m.mu.Unlock()
	if seen {
		return
	}
	m.record("", func(_ string, s ckState) []ckState { return []ckState{s} })
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncMark = m.seq
}

// freeze records that a crash image was taken: see frozen.
func (m *ckModel) freeze() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = true
}

// cold records a start on a new file: nothing is acknowledged.
func (m *ckModel) cold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base, m.pending, m.lastObs, m.frozen, m.settledAt = map[string]ckSet{}, nil, -1, false, 0
	m.listed = listedNo
}

// ack records the handler's Ack of obj (what it was given) after it
// returned. What Ack does depends on the key's state in the store when it
// ran. A step that does not wait leaves the informer busy, so that is any
// state the server held since the latest settled point (every state, after
// a start, until the first).
func (m *ckModel) ack(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// AckDeleted: a tombstone is settled; anything else stays.
		deleted := ""
		if p, ok := d.Obj.(*corev1.Pod); ok {
			deleted = string(p.UID)
		}
		m.record(d.Key, func(key string, s ckState) []ckState {
			switch s.kind {
			case ckTomb:
				return []ckState{none}
			case ckTombAcked:
				// The acknowledgement on disk stays until a commit deletes
				// the key or writes another.
				return []ckState{none, {kind: ckAcked, rv: s.rv}}
			case ckAcked, ckStale:
				if deleted != "" && uidOf(m.srv, key, s.rv) == deleted {
					// An acknowledgement of the object this deletion
					// removed. The store applied the deletion before the
					// handler was given it, which made the acknowledgement
					// a tombstone. The model records the deletion only at
					// the next settled point. An acknowledgement of a newer
					// object under the key stays.
					return []ckState{s, none}
				}
			}
			return []ckState{s}
		})
		return
	}
	p := obj.(*corev1.Pod)
	key, rv := p.Namespace+"/"+p.Name, p.ResourceVersion
	// The version a watch delivers a deletion at may be a tombstone's
	// (Op.DeletedAt); a deletion from a list carries none.
	deletion := false
	if n, err := strconv.ParseInt(rv, 10, 64); err == nil {
		if st, ok := m.srv.StateAt(n); ok && st.Key == key && st.Deleted {
			deletion = true
		}
	}
	m.mu.Lock()
	since := m.settledAt
	m.mu.Unlock()
	stored := m.srv.StatesSince(key, since)
	m.record(key, func(_ string, s ckState) []ckState {
		out := ckSet{}
		for _, cur := range stored {
			for _, n := range ackStep(m.srv, key, rv, deletion, s, cur) {
				out[n] = struct{}{}
			}
		}
		return slices.Collect(maps.Keys(out))
	})
}

// ackStep returns the states an Ack of key at rv takes s to while the
// store holds cur for key (nil: nothing); deletion says rv is the version
// of the key's deletion.
func ackStep(srv *Server, key, rv string, deletion bool, s ckState, cur *corev1.Pod) []ckState {
	if s.kind == ckTombAcked {
		// Ack goes by the tombstone in memory; an ack it drops leaves the
		// one on disk.
		out := ackStep(srv, key, rv, deletion, tomb, cur)
		for i, n := range out {
			if n == tomb {
				out[i] = s
			}
		}
		return out
	}
	// In memory an acknowledgement, which skips only if it is of the
	// stored object.
	written := ckState{kind: ckStale, rv: rv}
	if cur != nil && uidOf(srv, key, rv) == string(cur.UID) {
		written.kind = ckAcked
	}
	switch {
	case s.kind == ckTomb && cur != nil && rv == cur.ResourceVersion:
		// The state stored after the deletion settles it.
		return []ckState{written}
	case s.kind == ckTomb && deletion:
		// Settled if the deletion came by watch at this version.
		return []ckState{s, none}
	case s.kind == ckTomb && cur != nil && uidOf(srv, key, rv) == string(cur.UID):
		// An older state of the object the key holds now: dropped, unless
		// the file held the acknowledgement of the deleted object where
		// memory held the tombstone (a commit writes a deletion and a
		// creation between two commits as a put), and the collection was
		// opened again since: then it is written.
		return []ckState{s, written}
	case s.kind == ckTomb:
		return []ckState{s} // a state before the deletion: dropped
	case deletion && s.kind != ckNone:
		// The handler was told of the deletion, so the store applied it,
		// which made a tombstone of the acknowledgement; the model records
		// that at the next settled point. By watch, at this version, the
		// Ack settles that tombstone. As an AckDeleted of a key no longer
		// stored, it may also be written.
		if cur == nil {
			return []ckState{s, written, none}
		}
		return []ckState{s, none}
	case s.rv == rv:
		return []ckState{s} // acknowledged already
	case deletion && cur == nil:
		// As an AckDeleted: the deletion, applied before the handler was
		// told, may have made s a tombstone the model has not recorded
		// yet (see ack), which this settles.
		return []ckState{s, written, none}
	case cur != nil:
		return []ckState{written} // a stale version replaces a newer one too
	case deletion:
		// The handler was given this deletion, so the store applied it
		// first. An acknowledgement the key held became a tombstone then,
		// which this Ack settles. The model records the deletion only at
		// the next settled point.
		return []ckState{s, written, none}
	default:
		// Not stored: in memory if its deletion is committed; on disk
		// only if the key is created again before the commit.
		return []ckState{s, written}
	}
}

// clear records Checkpoint.Clear.
func (m *ckModel) clear() {
	m.record("", func(string, ckState) []ckState { return []ckState{none} })
}

// damaged records damage to the closed file. A set-aside of the journal or
// of unreadable records turns the acknowledgements of the keys it drops
// into tombstones (persist's checkpoint rules); other damage may start the
// collection cold, which drops everything.
//
// A set-aside of the journal may also take a key back to an older state
// the trees hold (another object under the key, deleted since). The relist
// it owes then replaces that object, which makes the key's acknowledgement a
// tombstone in memory, and stores the acknowledged state again. A commit
// writes a layer's net change, a put, so the acknowledgement stays on disk
// (ckTombAcked) while Ack goes by the tombstone: an acknowledgement of an
// older state is dropped rather than written.
func (m *ckModel) damaged(mayStartCold bool) {
	if mayStartCold {
		m.mu.Lock()
		m.listed = min(m.listed, listedMaybe)
		m.mu.Unlock()
	}
	m.record("", func(_ string, s ckState) []ckState {
		out := []ckState{s}
		if s.kind == ckAcked || s.kind == ckStale {
			out = append(out, tomb)
		}
		if s.kind == ckAcked {
			out = append(out, ckState{kind: ckTombAcked, rv: s.rv})
		}
		if mayStartCold {
			out = append(out, none)
		}
		return out
	})
}

// settled records, at a settled point, the deletions the store applied
// since the last one: a key acknowledged and gone from the server was
// deleted, which makes a tombstone; a key the server holds under another
// UID than the acknowledged state's may have been deleted and created
// again, or replaced by a list.
func (m *ckModel) settled() {
	rev := m.srv.Revision()
	pods := m.srv.Pods()
	m.mu.Lock()
	m.settledAt = rev
	keys := m.keysLocked()
	var changed []string
	for _, k := range keys {
		cur := m.currentLocked(k)
		if !setEqual(reconcile(m.srv, k, pods[k], cur), cur) {
			changed = append(changed, k)
		}
	}
	m.mu.Unlock()
	for _, k := range changed {
		p := pods[k]
		m.record(k, func(key string, s ckState) []ckState {
			return slices.Collect(maps.Keys(reconcile(m.srv, key, p, setOf(s))))
		})
	}
}

// reconcile returns the states set reaches once the store holds p for key
// (nil: nothing). A deleted key's acknowledgement becomes a tombstone. A
// key held under a new UID was deleted and created again (a tombstone), or
// replaced by a list (a stale acknowledgement).
func reconcile(srv *Server, key string, p *corev1.Pod, set ckSet) ckSet {
	out := ckSet{}
	for s := range set {
		switch {
		case s.kind == ckTombAcked && p == nil:
			out[tomb] = struct{}{} // the deletion's commit drops the acknowledgement
		case s.kind != ckAcked && s.kind != ckStale:
			out[s] = struct{}{}
		case p == nil:
			out[tomb] = struct{}{}
		case s.kind == ckAcked && uidOf(srv, key, s.rv) != string(p.UID):
			out[ckState{kind: ckStale, rv: s.rv}] = struct{}{}
			out[tomb] = struct{}{}
		default:
			out[s] = struct{}{}
		}
	}
	return out
}

// observed returns what the handler sees of s while the server holds p for
// key (nil: nothing): an acknowledgement that does not name a state of p
// counts as a tombstone. With exact, the file holds p itself (a clean
// stop): an acknowledgement of an older state of p can skip nothing either.
func observed(srv *Server, key string, s ckState, p *corev1.Pod, exact bool) ckState {
	if s.kind == ckTombAcked {
		s.kind = ckAcked // the file's
	}
	switch {
	case s.kind == ckStale:
		return tomb
	case s.kind == ckAcked && (p == nil || uidOf(srv, key, s.rv) != string(p.UID)):
		return tomb
	case s.kind == ckAcked && exact && s.rv != p.ResourceVersion:
		return tomb
	}
	return s
}

// observedSet is observed over a set.
func observedSet(srv *Server, key string, set ckSet, p *corev1.Pod, exact bool) ckSet {
	out := ckSet{}
	for s := range set {
		out[observed(srv, key, s, p, exact)] = struct{}{}
	}
	return out
}

// uidOf returns the UID of the object whose state rv is, if rv is a state
// of key; "" otherwise.
func uidOf(srv *Server, key, rv string) string {
	if n, err := strconv.ParseInt(rv, 10, 64); err == nil {
		if st, ok := srv.StateAt(n); ok && st.Key == key && !st.Deleted {
			return string(st.UID)
		}
	}
	return ""
}

func setEqual(a, b ckSet) bool {
	if len(a) != len(b) {
		return false
	}
	for s := range a {
		if _, ok := b[s]; !ok {
			return false
		}
	}
	return true
}

// ckStart is what the checkpoint's handler holds when the informer starts
// on the closed file.
type ckStart struct {
	// durable: keys the file certainly acknowledges, at the version; the
	// handler must never get an initial add of that state.
	durable map[string]string
	// view: what the handler holds: a key at the server's state where it
	// may be skipped, a placeholder where it must be told.
	view map[string]Version
	// maybe: held keys whose deletion, if the server lacks them, the
	// handler may or may not be told: the file may hold nothing for them,
	// and a key deleted before the start hands it out is never given.
	maybe map[string]bool
}

// start returns the handler's starting point for an informer started on
// the closed file, the server holding pods.
func (m *ckModel) start(pods map[string]*corev1.Pod) ckStart {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := ckStart{durable: map[string]string{}, view: map[string]Version{}, maybe: map[string]bool{}}
	for _, k := range m.keysLocked() {
		set := observedSet(m.srv, k, m.possibleLocked(k), pods[k], false)
		holds, empty := false, false
		for s := range set {
			holds = holds || s.holds()
			empty = empty || !s.holds()
		}
		if len(set) == 1 {
			for s := range set {
				if s.kind == ckAcked {
					st.durable[k] = s.rv
				}
			}
		}
		p := pods[k]
		switch {
		case p != nil && hasState(set, ckState{kind: ckAcked, rv: p.ResourceVersion}):
			st.view[k] = Version{UID: p.UID, RV: p.ResourceVersion}
		case holds:
			st.view[k] = Version{UID: "unknown"}
		}
		if holds && empty {
			st.maybe[k] = true
		}
	}
	return st
}

func hasState(set ckSet, s ckState) bool {
	_, ok := set[s]
	return ok
}

// crossCheck compares the closed file's checkpoint (acks, tombstones) with
// the states the model allows, both as the handler sees them while the
// server holds pods (and, after a clean stop, the file holds them too);
// "" if the file's is one of them for every key. A tombstone where the
// model allows nothing is one more delivery of a deletion, which
// at-least-once delivery allows: an acknowledgement of an older object
// stays on disk after its deletion was acknowledged.
func (m *ckModel) crossCheck(acks map[string]string, tombstones []string, pods map[string]*corev1.Pod, clean bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	file := map[string]ckState{}
	for k, rv := range acks {
		file[k] = ckState{kind: ckAcked, rv: rv}
	}
	for _, k := range tombstones {
		// An acknowledgement of the stored object and a tombstone of an
		// older one: the acknowledgement skips, the key is held either way.
		if s, ok := file[k]; !ok || observed(m.srv, k, s, pods[k], clean) != s {
			file[k] = tomb
		}
	}
	keys := map[string]bool{}
	for k := range file {
		keys[k] = true
	}
	for _, k := range m.keysLocked() {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		s, ok := file[k]
		if !ok {
			s = none
		}
		s = observed(m.srv, k, s, pods[k], clean)
		set := observedSet(m.srv, k, m.baseLocked(k), pods[k], clean)
		if !hasState(set, s) && !(s == tomb && hasState(set, none)) {
			out = append(out, fmt.Sprintf("%s: the file holds %s, the model allows %s", k, s, set))
		}
	}
	return strings.Join(out, "; ")
}

// ackString describes an acknowledged object for the trace.
func ackString(obj interface{}) string {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return o.Key + "(deleted)"
	case *corev1.Pod:
		return fmt.Sprintf("%s/%s@%s", o.Namespace, o.Name, o.ResourceVersion)
	}
	return fmt.Sprintf("%T", obj)
}
