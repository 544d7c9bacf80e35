package cache

import (
	"maps"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/processor"
)

// retelling holds what set-asides owe the handlers of tombstones. A key set
// aside is a deletion no watch event will carry. Once the list the store
// owes is applied, every handler given tombstones is told of each such key
// the list did not bring back (retellLocked). A key the handlers are told
// of meanwhile is owed nothing, since the notification supersedes the
// tombstone.
//
// The lock order is blockDeltas, then mu.
type retelling struct {
	mu sync.Mutex
	// joins are every handler given tombstones.
	joins []pendingJoin
	// keys are owed. With all, every key is owed except those told of since.
	keys   map[string]struct{}
	all    bool
	except map[string]struct{}
	// walkJoins are checkpoint handlers given stored objects during the
	// walk. walkSucceeded says the walk set nothing aside, so none are kept.
	walkJoins     []walkJoin
	walkSucceeded bool
	// due says keys or all is set. It is read without mu after every
	// applied delta.
	due atomic.Bool
}

// walkJoin is a checkpoint's handler that joined during a warm start's
// walk, with the objects it was given. They were read from the file without
// waiting for the walk. So they may include keys the walk then sets aside.
type walkJoin struct {
	l     *processor.Listener
	given []interface{}
}

// addJoin records a handler given tombstones.
func (r *retelling) addJoin(j pendingJoin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joins = append(r.joins, j)
}

// owe records keys set aside, to be told once the owed list is applied.
func (r *retelling) owe(keys map[string]struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = keys
	} else {
		maps.Copy(r.keys, keys)
	}
	for k := range keys {
		delete(r.except, k) // Set aside again, so owed again.
	}
	r.due.Store(true)
}

// oweAll records that every key was set aside.
func (r *retelling) oweAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all, r.except = true, nil
	r.due.Store(true)
}

// supersede notes that the handlers are being told of key, so a tombstone
// owed for it is stale. The common case costs one atomic load.
func (r *retelling) supersede(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.keys, key)
	if r.all {
		if r.except == nil {
			r.except = map[string]struct{}{}
		}
		r.except[key] = struct{}{}
	}
}

// noteWalkJoin records the objects given to a handler whose join read
// began during the walk. The read may include keys the walk then sets
// aside, though the walk has ended by now. A walk that set nothing aside
// forgets them (forgetWalkJoins). Called under blockDeltas.
func (r *retelling) noteWalkJoin(l *processor.Listener, given []interface{}) {
	if len(given) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.walkSucceeded {
		r.walkJoins = append(r.walkJoins, walkJoin{l, given})
	}
}

// forgetWalkJoins drops the joins noted during a walk that set nothing
// aside. Called after the walk ended.
func (r *retelling) forgetWalkJoins() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.walkJoins, r.walkSucceeded = nil, true
}

// take returns what is owed and forgets it. The joins stay.
func (r *retelling) take() (owed func(key string) bool, joins []pendingJoin, walkJoins []walkJoin, any bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys, all, except := r.keys, r.all, r.except
	joins, walkJoins = r.joins, r.walkJoins
	r.keys, r.all, r.except, r.walkJoins = nil, false, nil, nil
	r.due.Store(false)
	owed = func(key string) bool {
		_, set := keys[key]
		_, told := except[key]
		return set || (all && !told)
	}
	return owed, joins, walkJoins, len(keys) > 0 || all
}

// supersede notes that the handlers are being told of obj's key (see
// retelling.supersede). Called under blockDeltas.
func (s *Informer) supersede(obj interface{}) {
	if !s.retell.due.Load() {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.retell.supersede(key)
}

// retellLocked tells handlers, once the list a set-aside owed is applied,
// of the keys set aside that the list did not bring back. Every handler of
// tombstones gets their tombstones. A checkpoint may have acknowledged such
// a key before the set-aside made it a tombstone. A checkpoint's handler
// that joined during the walk gets the deletion of each such key it was
// given. Its deletion reaches these handlers no other way. Called under
// blockDeltas.
func (s *Informer) retellLocked() {
	if !s.retell.due.Load() || s.gate.owes() {
		return
	}
	owed, joins, walkJoins, any := s.retell.take()
	if !any {
		return
	}
	told := map[*processor.Listener]map[string]bool{}
	for _, j := range joins {
		only := []*processor.Listener{j.l} // Not if it was removed meanwhile.
		for _, n := range tombstoneNotifications(s.store, j.cps) {
			key := n.(processor.DeleteNotification).Obj.(cache.DeletedFinalStateUnknown).Key
			if owed(key) {
				s.processor.DistributeTo(only, n)
				if told[j.l] == nil {
					told[j.l] = map[string]bool{}
				}
				told[j.l][key] = true
			}
		}
	}
	lacks := storeLacks(s.store)
	for _, j := range walkJoins {
		only := []*processor.Listener{j.l}
		for _, obj := range j.given {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil || !owed(key) || told[j.l][key] || !lacks(key) {
				continue
			}
			s.processor.DistributeTo(only, processor.DeleteNotification{Obj: cache.DeletedFinalStateUnknown{Key: key, Obj: obj}})
		}
	}
}
