package simulation

import (
	"fmt"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// An apiserver as weak as the API allows (kube-apiserver v1.36's
// storage/cacher delegator and the API concepts page, "Semantics for get
// and list"): one to three kube-apiservers behind one address, each with a
// watch cache of its own whose position may lag etcd's revision. Each
// list and watch lands on one of them, chosen by the server's seeded
// generator.
//
// Which reads a watch cache serves, and which etcd serves:
//   - resourceVersion "" is a consistent read: the serving cache first
//     catches up with etcd (ConsistentListFromCache), so it is the newest.
//   - "0" is served from the cache at its position, which may be older
//     than the newest revision but never newer.
//   - NotOlderThan X (or X without a match and without a limit) is served
//     from the cache once it reaches X; a cache that does not reach X in
//     its three seconds answers 504 "Too large resource version".
//   - Exact X, X without a match but with a limit (the legacy exact read)
//     and continue tokens are served from etcd at exactly that revision:
//     410 below the compaction, 504 "Too large resource version" above the
//     newest.
//   - A watch from "" or "0" starts at the cache's position with its state
//     as synthetic adds; a watch from X delivers the changes after X as the
//     cache applies them, waiting while the cache is behind X, and expires
//     (410) below the oldest change the cache keeps.
//
// Without Lag every cache applies each change as it is written, which is
// the simulation's original, kinder server. With SlowCache too, the last
// apiserver is slow (an overloaded one, or one whose etcd watch is slow):
// its cache applies what etcd has a quarter as often, and answers three
// in four reads at a version it has not reached with 504.

// instance is one kube-apiserver's watch cache. Guarded by Server.mu.
type instance struct {
	id int
	// pos is the revision the cache has reached: it has applied every
	// change up to pos, and pos never passes Server.rev.
	pos int64
	// windowStart: a watch from an older revision expires. A restart moves
	// it to the revision the cache started at; the window keeps the cache's
	// last Window changes.
	windowStart int64
}

// newServerFor returns the server sched's configuration describes.
func newServerFor(sched Schedule) *Server {
	c := sched.Config
	return NewServer(ServerOptions{
		Window: c.Window, ExpireInStream: c.ExpireInStream,
		Instances: c.Instances, Lag: c.Lag, CachePages: c.CachePages, PageCap: c.PageCap,
		Seed: sched.Seed, Wire: c.Wire, Cut: c.Cut, FieldCuts: c.FieldCuts, SlowCache: c.SlowCache,
	})
}

// pickLocked returns the instance a request lands on.
func (s *Server) pickLocked() *instance {
	if len(s.insts) == 1 {
		return s.insts[0]
	}
	return s.insts[s.rng.Intn(len(s.insts))]
}

// advanceLocked has in's cache apply every change up to revision to, and
// sends those changes to the watches it serves.
func (s *Server) advanceLocked(in *instance, to int64) {
	to = min(to, s.rev)
	if to <= in.pos {
		return
	}
	first := sort.Search(len(s.history), func(i int) bool { return s.history[i].rev > in.pos })
	for _, c := range s.history[first:] {
		if c.rev > to {
			break
		}
		for w := range s.watches {
			if w.inst == in && c.rev > w.pos {
				w.sendLocked(watch.Event{Type: c.typ, Object: c.obj.DeepCopy()}, c.rev)
			}
		}
	}
	in.pos = to
	s.trimWindowLocked(in)
}

// trimWindowLocked moves in.windowStart so that its watch cache keeps the
// last window changes it has applied.
func (s *Server) trimWindowLocked(in *instance) {
	n := 0
	for i := len(s.history) - 1; i >= 0 && s.history[i].rev > in.windowStart; i-- {
		if s.history[i].rev > in.pos {
			continue
		}
		n++
		if n > s.window {
			in.windowStart = s.history[i].rev
			return
		}
	}
}

// Tick lets each lagging watch cache apply more of what etcd has: the
// next change, or nothing, as the server's generator chooses (once no
// change is left, it reaches etcd's revision). The driver calls it while
// it waits for the informer, in place of time.
func (s *Server) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.insts {
		if in.pos >= s.rev || s.rng.Intn(2) == 0 || (s.slowLocked(in) && s.rng.Intn(4) != 0) {
			continue
		}
		to := s.rev
		if i := sort.Search(len(s.history), func(i int) bool { return s.history[i].rev > in.pos }); i < len(s.history) {
			to = s.history[i].rev
		}
		s.advanceLocked(in, to)
	}
}

// slowLocked reports whether in is the slow apiserver of a server with
// SlowCache: the last one.
func (s *Server) slowLocked(in *instance) bool {
	return s.slowCache && in.id == len(s.insts)-1
}

// tooLargeLocked decides whether a lagging cache answers a read at a
// version it has not reached 504 "Too large resource version", having not
// reached it in the three seconds kube-apiserver waits: one read in four,
// three in four on the slow apiserver.
func (s *Server) tooLargeLocked(in *instance) bool {
	if s.slowLocked(in) {
		return s.rng.Intn(4) != 0
	}
	return s.rng.Intn(4) == 0
}

// latestChangeLocked is the revision of the resource's latest change.
func (s *Server) latestChangeLocked() int64 {
	if n := len(s.history); n > 0 {
		return s.history[n-1].rev
	}
	return 0
}

// tooLargeError is kube-apiserver's answer to a read (or watch-list) at a
// revision its watch cache did not reach in time, or etcd does not have.
func tooLargeError(rv, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// readAtLocked returns the revision a list with opts is served at on in,
// and whether a watch cache serves it (its Limit is then ignored unless the
// server pages from its cache).
func (s *Server) readAtLocked(in *instance, opts metav1.ListOptions) (rev int64, cached bool, err error) {
	if opts.Continue != "" {
		// As kube-apiserver validates a list's options and etcd3's store
		// its continue token.
		if opts.ResourceVersionMatch != "" {
			return 0, false, apierrors.NewBadRequest("resourceVersionMatch is forbidden when continue is provided")
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return 0, false, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		rv, _, err := parseContinue(opts.Continue)
		if err != nil {
			return 0, false, apierrors.NewBadRequest(err.Error())
		}
		s.counts["continued"]++
		if rv < s.compacted {
			s.counts["continue-expired"]++
			return 0, false, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
		}
		return rv, false, nil
	}
	switch opts.ResourceVersion {
	case "":
		s.advanceLocked(in, s.rev)
		return s.rev, true, nil
	case "0":
		s.countLaggedLocked(in.pos)
		return in.pos, true, nil
	}
	rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	if err != nil {
		return 0, false, apierrors.NewBadRequest("invalid resourceVersion " + opts.ResourceVersion)
	}
	exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		(opts.ResourceVersionMatch == "" && opts.Limit > 0)
	if exact {
		if rv < s.compacted {
			return 0, false, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, s.compacted))
		}
		if rv > s.rev {
			return 0, false, tooLargeError(rv, s.rev)
		}
		return rv, false, nil
	}
	// NotOlderThan: from the cache, once it has reached rv.
	if rv > in.pos {
		if rv > s.rev || (s.lag && s.tooLargeLocked(in)) {
			s.counts["too-large"]++
			return 0, false, tooLargeError(rv, in.pos)
		}
		s.advanceLocked(in, rv)
	}
	s.countLaggedLocked(in.pos)
	return in.pos, true, nil
}

// countLaggedLocked counts a read served at rev while the resource has a
// newer change.
func (s *Server) countLaggedLocked(rev int64) {
	if rev < s.latestChangeLocked() {
		s.counts["lagged"]++
	}
}

// RestartOne restarts one apiserver (n modulo their number): its watches
// end, and its watch cache starts afresh at etcd's revision, so watches
// from older revisions on it expire.
func (s *Server) RestartOne(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartLocked(s.insts[n%len(s.insts)])
}

func (s *Server) restartLocked(in *instance) {
	in.pos, in.windowStart = s.rev, s.rev
	for w := range s.watches {
		if w.inst == in {
			w.endLocked(nil)
		}
	}
}
