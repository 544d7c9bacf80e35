package simulation

import (
	"fmt"
	"maps"
	"math/rand"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Server is a simulated kube-apiserver serving one resource (Pods) from a
// simulated etcd: one global revision counter, so every write and every
// resourceVersion is an integer that only grows; the history of every
// change, so a list can be served at any revision not compacted; and one to
// three apiservers whose watch caches hold the last Window events, restart
// empty and may lag etcd (apiservers_test.go).
//
// Everything that changes the server is called by the driver, one step at a
// time, or by a trigger a step armed, inside a request (faults_test.go); the
// informer only reads. Requests from the informer's goroutines are served
// under mu.
type Server struct {
	// mu guards every field below and each watch's queue (watch_test.go).
	mu sync.Mutex

	rev  int64                  // the revision of the latest write, any resource
	objs map[string]*corev1.Pod // key → current object (never mutated)
	// history is every change of the resource, in revision order.
	history []change
	// states maps each revision written to the resource to what it wrote:
	// revisions are global, so a revision names one state of one key.
	states map[int64]State
	// live maps each existing object's UID to its key. A UID is never
	// reused, so a UID absent here was deleted for good.
	live map[types.UID]string

	// insts are the apiservers behind the address, each with its watch
	// cache (apiservers_test.go); window is how many changes each cache keeps.
	insts  []*instance
	window int
	// lag: caches apply changes only when Tick, a read or a watch needs
	// them to; otherwise each change reaches every cache as it is written.
	// slowCache: the last apiserver lags more (apiservers_test.go).
	lag, slowCache bool
	// cachePages: reads a watch cache serves honour Limit (kube-apiserver
	// 1.34's snapshots); otherwise they return every item, unpaged.
	cachePages bool
	// pageCap, if positive, is the most items a page holds whatever its
	// Limit: the API lets a server return fewer.
	pageCap int
	// quiet: bookmarks are withheld.
	quiet bool
	// rng makes the server's own choices (which apiserver serves a
	// request, how far a cache catches up, which body is cut).
	rng *rand.Rand
	// compacted: lists at an exact revision below it, and continue tokens
	// of lists below it, are answered 410 Expired.
	compacted int64
	// expireInStream: a watch from an expired revision is answered as a
	// restarted kube-apiserver answers it, HTTP 200 and one ERROR event;
	// otherwise with a 410 status error.
	expireInStream bool

	watches map[*simWatch]struct{}
	faults  []fault
	uids    int

	// triggers are armed by steps and fire inside requests (faults_test.go);
	// moved counts the writes they made, so that the driver knows the
	// server changed while it waited.
	triggers []*trigger
	moved    int
	// holdOpen: hold triggers hold their requests (faults_test.go); holding
	// counts the requests held, which wait for holdRelease to close.
	holdOpen    bool
	holding     int
	holdRelease chan struct{}
	// onCrash, if set, is called by a crash trigger, without mu held, with
	// what the trigger was.
	onCrash func(what string)
	// onWrite, if set, is called by a trigger's writes, without mu held,
	// with what the trigger did (differential_test.go repeats it on the mirror).
	// writes, if set, is held (before mu) while a request's triggers fire
	// and onWrite repeats their writes.
	onWrite func(do, key string, arg int)
	writes  *sync.Mutex
	// wire: watches and recovery lists are served as protobuf bytes
	// (wirelister_test.go); cut: some of those bodies end early; fieldCuts:
	// half of those at a field's boundary.
	wire, cut, fieldCuts bool

	counts map[string]int // requests served, by kind (for the trace)
	// fetched is, per key, the newest resourceVersion a fetch or a watch
	// served.
	fetched map[string]int64
}

// State is one revision of one key: an object's state, or its deletion.
type State struct {
	Key     string
	UID     types.UID
	Deleted bool
}

type change struct {
	typ watch.EventType
	rev int64
	obj *corev1.Pod // the object as the watch delivers it (a deletion: the last state at rev)
}

// ServerOptions configures a Server.
type ServerOptions struct {
	// Window is how many changes the watch cache keeps.
	Window int
	// ExpireInStream answers a watch from an expired revision with an
	// in-stream ERROR event instead of a status error.
	ExpireInStream bool
	// Instances is how many apiservers serve behind the address; zero
	// means one.
	Instances int
	// Lag lets their watch caches fall behind etcd (apiservers_test.go);
	// SlowCache makes the last one lag more.
	Lag, SlowCache bool
	// CachePages makes cache-served reads honour Limit.
	CachePages bool
	// PageCap, if positive, caps every page's items.
	PageCap int
	// Seed seeds the server's own choices.
	Seed int64
	// Wire serves watches and recovery lists as protobuf bytes; Cut ends
	// some of those bodies early, FieldCuts half of those at a field's
	// boundary.
	Wire, Cut, FieldCuts bool
}

// NewServer returns an empty server at revision 1.
func NewServer(opts ServerOptions) *Server {
	s := &Server{
		rev:            1,
		objs:           map[string]*corev1.Pod{},
		states:         map[int64]State{},
		live:           map[types.UID]string{},
		window:         max(opts.Window, 1),
		lag:            opts.Lag,
		slowCache:      opts.SlowCache,
		cachePages:     opts.CachePages,
		pageCap:        opts.PageCap,
		rng:            rand.New(rand.NewSource(opts.Seed)),
		wire:           opts.Wire,
		cut:            opts.Cut,
		fieldCuts:      opts.FieldCuts,
		expireInStream: opts.ExpireInStream,
		watches:        map[*simWatch]struct{}{},
		counts:         map[string]int{},
		fetched:        map[string]int64{},
		holdRelease:    make(chan struct{}),
	}
	for i := range max(opts.Instances, 1) {
		s.insts = append(s.insts, &instance{id: i, pos: s.rev})
	}
	return s
}

func splitKey(key string) (ns, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// writeLocked records a change at the next revision; a cache that does not
// lag applies it, and sends it to its watches, at once.
func (s *Server) writeLocked(typ watch.EventType, p *corev1.Pod) {
	s.rev++
	p.ResourceVersion = strconv.FormatInt(s.rev, 10)
	key := p.Namespace + "/" + p.Name
	s.states[s.rev] = State{Key: key, UID: p.UID, Deleted: typ == watch.Deleted}
	if typ == watch.Deleted {
		delete(s.objs, key)
		delete(s.live, p.UID)
	} else {
		s.objs[key] = p
		s.live[p.UID] = key
	}
	s.history = append(s.history, change{typ: typ, rev: s.rev, obj: p})
	s.keepUpLocked()
}

// keepUpLocked has every cache that does not lag apply what etcd has.
func (s *Server) keepUpLocked() {
	if s.lag {
		return
	}
	for _, in := range s.insts {
		s.advanceLocked(in, s.rev)
	}
}

// Create creates the object key with a new UID; false if it exists.
func (s *Server) Create(key string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(key, gen)
}

func (s *Server) createLocked(key string, gen int) bool {
	if _, ok := s.objs[key]; ok {
		return false
	}
	s.uids++
	ns, name := splitKey(key)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		UID:    types.UID(fmt.Sprintf("uid-%d", s.uids)),
		Labels: map[string]string{"gen": strconv.Itoa(gen)},
	}}
	s.writeLocked(watch.Added, p)
	return true
}

// Update changes the object key; false if it does not exist.
func (s *Server) Update(key string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(key, gen)
}

func (s *Server) updateLocked(key string, gen int) bool {
	old, ok := s.objs[key]
	if !ok {
		return false
	}
	p := old.DeepCopy()
	p.Labels = map[string]string{"gen": strconv.Itoa(gen)}
	s.writeLocked(watch.Modified, p)
	return true
}

// Delete deletes the object key; false if it does not exist.
func (s *Server) Delete(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(key)
}

func (s *Server) deleteLocked(key string) bool {
	old, ok := s.objs[key]
	if !ok {
		return false
	}
	s.writeLocked(watch.Deleted, old.DeepCopy())
	return true
}

// OtherWrites advances the revision as writes to other resources do.
func (s *Server) OtherWrites(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev += int64(n)
	s.keepUpLocked()
}

// Restart restarts every apiserver: every watch ends (the connection
// drops), each watch cache starts afresh at the current revision after the
// writes other components make meanwhile, so every watch from an older
// revision expires.
func (s *Server) Restart(otherWrites int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartAllLocked(otherWrites)
}

func (s *Server) restartAllLocked(otherWrites int) {
	s.rev += int64(otherWrites)
	for _, in := range s.insts {
		s.restartLocked(in)
	}
}

// Compact compacts the simulated etcd at the current revision: lists at an
// older exact revision and continue tokens of older lists expire.
func (s *Server) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rev
}

// EndWatches ends every watch normally, as their timeouts do.
func (s *Server) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		w.endLocked(nil)
	}
}

// EndShortWatches ends the watches that asked for a timeout of at most
// seconds, as their timeouts do. The driver calls it while it waits for the
// informer, in place of the timeouts' passing: a catch-up watch lasts 3
// seconds and waits for its next consistent read until it ends.
func (s *Server) EndShortWatches(seconds int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		if w.timeout > 0 && w.timeout <= seconds {
			w.endLocked(nil)
		}
	}
}

// Bookmark sends every watch that asked for bookmarks one at the current
// revision, as the watch cache does periodically and before a timeout.
func (s *Server) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bookmarkLocked()
}

// bookmarkLocked sends each watch that asked for bookmarks one at its
// cache's position, unless bookmarks are withheld.
func (s *Server) bookmarkLocked() {
	if s.quiet {
		return
	}
	for w := range s.watches {
		w.bookmarkLocked(w.inst.pos)
	}
}

// Close ends every watch; the server serves nothing open afterwards.
func (s *Server) Close() {
	s.mu.Lock()
	ws := make([]*simWatch, 0, len(s.watches))
	for w := range s.watches {
		w.endLocked(nil)
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		<-w.done
		if w.pumped != nil {
			<-w.pumped
		}
	}
}

// Revision returns the current revision.
func (s *Server) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Objects returns key → (UID, resourceVersion) of the current objects.
func (s *Server) Objects() map[string]Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Version, len(s.objs))
	for k, p := range s.objs {
		out[k] = Version{UID: p.UID, RV: p.ResourceVersion}
	}
	return out
}

// ObjectsAt returns key → (UID, resourceVersion) of the objects at
// revision rev.
func (s *Server) ObjectsAt(rev int64) map[string]Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Version{}
	for _, p := range s.stateAtLocked(rev) {
		out[p.Namespace+"/"+p.Name] = Version{UID: p.UID, RV: p.ResourceVersion}
	}
	return out
}

// Keys returns the keys of the current objects, sorted.
func (s *Server) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objs))
	for k := range s.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// StateAt returns what revision rv wrote to the resource, if anything.
func (s *Server) StateAt(rv int64) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[rv]
	return st, ok
}

// LatestChange returns the revision of the resource's latest change, 0 if
// none.
func (s *Server) LatestChange() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latestChangeLocked()
}

// ChangesSince returns, for each key the resource changed after revision
// rev, the revision of its latest change.
func (s *Server) ChangesSince(rev int64) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for i := len(s.history) - 1; i >= 0 && s.history[i].rev > rev; i-- {
		c := s.history[i]
		key := c.obj.Namespace + "/" + c.obj.Name
		if _, ok := out[key]; !ok {
			out[key] = c.rev
		}
	}
	return out
}

// StatesSince returns the states key held from revision rev on: its state
// at rev, then the state after each later change (nil: absent).
func (s *Server) StatesSince(key string, rev int64) []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at *corev1.Pod
	var out []*corev1.Pod
	for _, c := range s.history {
		if c.obj.Namespace+"/"+c.obj.Name != key {
			continue
		}
		next := c.obj
		if c.typ == watch.Deleted {
			next = nil
		}
		if c.rev <= rev {
			at = next
			continue
		}
		if out == nil {
			out = []*corev1.Pod{at}
		}
		out = append(out, next)
	}
	if out == nil {
		out = []*corev1.Pod{at}
	}
	return out
}

// Live reports whether the object with uid exists now.
func (s *Server) Live(uid types.UID) (key string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok = s.live[uid]
	return key, ok
}

// Counts returns how many requests of each kind were served.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

// Version is an object's identity and resourceVersion.
type Version struct {
	UID types.UID
	RV  string
}

func (v Version) String() string { return fmt.Sprintf("%s@%s", v.UID, v.RV) }

// stateAtLocked returns the resource's objects at revision rv, sorted by
// key.
func (s *Server) stateAtLocked(rv int64) []*corev1.Pod {
	var objs map[string]*corev1.Pod
	if rv >= s.rev {
		objs = s.objs
	} else {
		objs = map[string]*corev1.Pod{}
		for _, c := range s.history {
			if c.rev > rv {
				break
			}
			key := c.obj.Namespace + "/" + c.obj.Name
			if c.typ == watch.Deleted {
				delete(objs, key)
			} else {
				objs[key] = c.obj
			}
		}
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, p := range objs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}
