package simulation

import (
	"fmt"
	"maps"
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
// change, so a list can be served at any revision not compacted; and a
// watch cache holding the last Window events, which restarts empty.
//
// Everything that changes the server is called by the driver, one step at a
// time; the informer only reads. Requests from the informer's goroutines are
// served under mu.
type Server struct {
	// mu guards every field below and each watch's queue (watch.go).
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

	// Watch cache: a watch from rv needs every change after rv, so rv must
	// be at least windowStart. A restart sets windowStart to the current
	// revision; the window keeps the last window changes.
	windowStart int64
	window      int
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

	counts map[string]int // requests served, by kind (for the trace)
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
}

// NewServer returns an empty server at revision 1.
func NewServer(opts ServerOptions) *Server {
	return &Server{
		rev:            1,
		objs:           map[string]*corev1.Pod{},
		states:         map[int64]State{},
		live:           map[types.UID]string{},
		window:         max(opts.Window, 1),
		expireInStream: opts.ExpireInStream,
		watches:        map[*simWatch]struct{}{},
		counts:         map[string]int{},
	}
}

func splitKey(key string) (ns, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// write records a change at the next revision and sends it to the watches.
// Called with mu held.
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
	c := change{typ: typ, rev: s.rev, obj: p}
	s.history = append(s.history, c)
	s.trimWindowLocked()
	for w := range s.watches {
		w.sendLocked(watch.Event{Type: typ, Object: p.DeepCopy()}, s.rev)
	}
}

// trimWindowLocked moves windowStart so that the watch cache keeps the last
// window changes of the resource.
func (s *Server) trimWindowLocked() {
	n := 0
	for i := len(s.history) - 1; i >= 0 && s.history[i].rev > s.windowStart; i-- {
		n++
		if n > s.window {
			s.windowStart = s.history[i].rev
			return
		}
	}
}

// Create creates the object key with a new UID; false if it exists.
func (s *Server) Create(key string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
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
}

// Restart restarts the apiserver: every watch ends (the connection drops),
// the watch cache starts afresh at the current revision after the writes
// other components make meanwhile, so every watch from an older revision
// expires.
func (s *Server) Restart(otherWrites int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev += int64(otherWrites)
	s.windowStart = s.rev
	for w := range s.watches {
		w.endLocked(nil)
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

func (s *Server) bookmarkLocked() {
	for w := range s.watches {
		w.bookmarkLocked(s.rev)
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
