package simulation

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Faults and writes that strike mid-operation. A step arms a trigger: "before
// the n-th request of this kind from now, do this". It fires inside the
// server's handling of that request, before the request is served, so the
// informer meets it halfway through a list, a recovery or a watch: a
// compaction that expires the continue token the request carries, a write
// between a metadata list and its fetches or between two pages, a restart,
// an error on the third page, or a crash (the driver keeps the file as it
// was committed at that moment, then kills and restarts the informer from
// it). Commit triggers count the cache file's group commits instead of
// requests; the driver keeps those (midop_test.go).

// What a trigger does.
const (
	ActCompact    = "compact"     // a write elsewhere, then a compaction at it: older tokens expire
	ActCreate     = "create"      // create Key
	ActUpdate     = "update"      // update Key
	ActDelete     = "delete"      // delete Key
	ActRestart    = "restart"     // every apiserver restarts
	ActRestartOne = "restart-one" // one apiserver restarts (N)
	ActEndWatches = "end-watches" // every watch ends, as at its timeout
	ActError      = "error"       // the request fails with Code
	ActCrash      = "crash"       // the process dies: the file keeps what it had committed
	ActHold       = "hold"        // the request is answered slowly: held until the driver waits (OpenHolds)
)

// trigger is one armed fault or write.
type trigger struct {
	kind string // KindList, KindPage, KindMeta, KindFetch or KindWatch
	n    int    // requests of kind still to come, the firing one included
	do   string
	key  string
	code int // an error's HTTP status; the apiserver a restart-one restarts
	arg  int // a write's generation label
}

func (t *trigger) String() string {
	s := fmt.Sprintf("before %s #%d: %s", t.kind, t.n, t.do)
	switch t.do {
	case ActCreate, ActUpdate, ActDelete:
		s += " " + t.key
	case ActError, ActRestartOne:
		s += fmt.Sprintf(" %d", t.code)
	}
	return s
}

// Arm arms a trigger for the n-th request of kind from now.
func (s *Server) Arm(kind string, n int, do, key string, code, arg int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.triggers = append(s.triggers, &trigger{kind: kind, n: max(n, 1), do: do, key: key, code: code, arg: arg})
}

// Moved counts the objects' changes triggers made: the driver compares it
// before and after a wait to tell that the server changed meanwhile.
func (s *Server) Moved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved
}

// SetQuiet withholds bookmarks (true) or sends them again.
func (s *Server) SetQuiet(quiet bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quiet = quiet
}

// Quiet reports whether bookmarks are withheld.
func (s *Server) Quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quiet
}

// fire counts a request of kind with opts against the armed triggers and
// does what the due ones do, before the request is served. An error is
// injected as the first fault of the request's kind, so the request itself
// fails with it. A crash runs onCrash without mu held, since it copies the
// cache file. A hold blocks the request, holding no lock, until the holds
// are released or ctx ends; the request then fails with ctx's error.
func (s *Server) fire(ctx context.Context, kind string, opts metav1.ListOptions) error {
	if !s.fireTriggers(kind, opts) {
		return nil
	}
	s.mu.Lock()
	release := s.holdRelease
	s.holding++
	s.counts["held"]++
	s.mu.Unlock()
	select {
	case <-release:
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.holding--
	s.mu.Unlock()
	return ctx.Err()
}

// fireTriggers is fire without the hold: it reports whether the request
// is to be held.
func (s *Server) fireTriggers(kind string, opts metav1.ListOptions) (hold bool) {
	if s.writes != nil {
		// A trigger's write and its repetition on the mirror are one
		// step against the driver's writes (lockWrites).
		s.writes.Lock()
		defer s.writes.Unlock()
	}
	s.mu.Lock()
	var due []*trigger
	keep := s.triggers[:0]
	for _, t := range s.triggers {
		if t.kind == kind || (t.kind == KindPage && opts.Continue != "" && kind != KindWatch) {
			if t.n--; t.n <= 0 {
				due = append(due, t)
				continue
			}
		}
		keep = append(keep, t)
	}
	clear(s.triggers[len(keep):])
	s.triggers = keep
	var crash *trigger
	var wrote []*trigger
	for _, t := range due {
		s.counts["fired"]++
		s.counts["fired-"+t.do]++
		switch t.do {
		case ActCompact:
			s.rev++
			s.keepUpLocked()
			s.compacted = s.rev
		case ActCreate:
			if s.createLocked(t.key, t.arg) {
				s.moved++
			}
		case ActUpdate:
			if s.updateLocked(t.key, t.arg) {
				s.moved++
			}
		case ActDelete:
			if s.deleteLocked(t.key) {
				s.moved++
			}
		case ActRestart:
			s.restartAllLocked(1)
		case ActRestartOne:
			s.restartLocked(s.insts[t.code%len(s.insts)])
		case ActEndWatches:
			for w := range s.watches {
				w.endLocked(nil)
			}
		case ActError:
			s.faults = append([]fault{{kind: kind, code: t.code}}, s.faults...)
		case ActCrash:
			crash = t
		case ActHold:
			hold = hold || s.holdOpen
		}
		switch t.do {
		case ActCompact, ActCreate, ActUpdate, ActDelete, ActRestart:
			wrote = append(wrote, t)
		}
	}
	onCrash, onWrite := s.onCrash, s.onWrite
	s.mu.Unlock()
	if onWrite != nil {
		for _, t := range wrote {
			onWrite(t.do, t.key, t.arg)
		}
	}
	if crash != nil && onCrash != nil {
		onCrash(crash.String())
	}
	return hold
}

// Holds: a slow apiserver. A hold trigger makes its request wait, inside
// the server, until the driver next waits for the informer or stops it, so
// the steps in between (which do not wait) meet the informer halfway
// through a list, a recovery or a start: a stop, a crash, a 410, a write.
// Holds take effect only while the driver has opened them (OpenHolds); a
// hold due at another time is served at once.

// OpenHolds lets hold triggers hold their requests from now on.
func (s *Server) OpenHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdOpen = true
}

// CloseHolds releases every held request and disarms the hold triggers
// not yet due: the driver waits for the informer, which a held request
// would keep from settling.
func (s *Server) CloseHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holdOpen {
		return
	}
	s.holdOpen = false
	close(s.holdRelease)
	s.holdRelease = make(chan struct{})
	keep := s.triggers[:0]
	for _, t := range s.triggers {
		if t.do != ActHold {
			keep = append(keep, t)
		}
	}
	clear(s.triggers[len(keep):])
	s.triggers = keep
}

// Holding returns how many requests are held now.
func (s *Server) Holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding
}

// HoldsOpen reports whether holds are open.
func (s *Server) HoldsOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdOpen
}
