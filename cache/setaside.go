package cache

import (
	"context"
	"fmt"
	"sync"
)

// AddIndexers builds the new indexes from the stored records, at any time,
// as client-go allows. A record the build cannot decode cannot be indexed,
// and persist's AddIndexes then changes nothing and names the records. The
// persistent Indexer asks its informer to set them aside (setAsideUnreadable),
// then builds again. The informer can list, so it treats them as the warm
// start's walk treats a record it cannot read, in five steps.
//
//  1. The store owes a list from before the records are dropped, so no
//     lister reads the partial store as complete (readgate.go).
//  2. The records are dropped with the must-list mark in one commit
//     (persist.Collection.SetAsideUnreadable). A stop before the list lands
//     lists at the next start. Nothing holds watch events back between the
//     failed build and the drop. So the drop takes only a record that still
//     does not decode, and keeps one an event wrote since, under the lock
//     that orders applies. Dropping that one would make the list bring back
//     an object the handlers hold, as a second add.
//  3. Dropped keys the start handlers were not given yet are kept from
//     them, as keepOnly keeps them. A deletion of one is then not told to
//     them.
//  4. The checkpoints' handlers are told of the dropped keys the list does
//     not bring back (retelling.owe).
//  5. The running informer reports the set-aside to the watch error
//     handler, counts a reset, and lists (runSetAsides). Before the start,
//     the start itself lists, because the store owes a list (listIfOwed).
//
// A bare Indexer has no list to fetch the records again with. Its
// AddIndexers fails instead, and keeps the records, whose reads keep
// failing.

// setAsides carries what setAsideUnreadable tells the running informer. It
// runs on the caller of AddIndexers, which may hold life.mu, so it only
// records and signals. runSetAsides reports and lists.
type setAsides struct {
	mu     sync.Mutex // a leaf lock: nothing is taken under it
	errs   []error    // Set-asides not reported yet, guarded by mu.
	relist bool       // A set-aside after the start's list decision, guarded by mu.
	due    chan struct{}
}

func newSetAsides() *setAsides { return &setAsides{due: make(chan struct{}, 1)} }

// add records a set-aside, and whether it needs a relist of its own.
func (p *setAsides) add(why error, relist bool) {
	p.mu.Lock()
	p.errs = append(p.errs, why)
	p.relist = p.relist || relist
	p.mu.Unlock()
	select {
	case p.due <- struct{}{}:
	default: // Already signalled, and runSetAsides takes everything recorded.
	}
}

// take returns what was recorded since the last take, and forgets it.
func (p *setAsides) take() ([]error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs, relist := p.errs, p.relist
	p.errs, p.relist = nil, false
	return errs, relist
}

// setAsideUnreadable sets aside the stored records of keys, which an index
// build could not decode (why), as the comment above says. A key written
// since is kept. It returns the error of the drop, if it failed. The store
// then still owes a list, which the informer makes. A list is owed even if
// every key was kept, since the debt was taken before the drop could tell.
func (s *Informer) setAsideUnreadable(keys []string, why error) error {
	// Under writeMu from the first owe to the last, as keepOnly says.
	drop := func() (dropped []string, err error) {
		err = s.persistent.setAside(func() error {
			s.gate.owe()
			var err error
			dropped, err = s.persistent.coll.SetAsideUnreadable(keys)
			// A new generation after the drop too, as keepOnly makes one.
			s.gate.owe()
			return err
		})
		return dropped, err
	}
	var dropped []string
	var err error
	if d := s.start.walk.Load(); d != nil {
		dropped, err = d.setAside(drop)
	} else {
		dropped, err = drop()
	}
	if len(dropped) > 0 {
		retell := make(map[string]struct{}, len(dropped))
		for _, key := range dropped {
			retell[key] = struct{}{}
		}
		s.retell.owe(retell)
	}
	if err == nil && len(dropped) < len(keys) {
		why = fmt.Errorf("%w; %d of them were written since, and were kept", why, len(keys)-len(dropped))
	}
	// Read after the first owe, so a start that has not decided yet whether
	// to list sees the debt and lists (begin, listIfOwed).
	s.setAsides.add(why, s.start.begun.Load())
	return err
}

// runSetAsides reports each set-aside setAsideUnreadable recorded, and
// relists if one came after the start decided whether to list. It returns
// when ctx ends.
func (s *Informer) runSetAsides(ctx context.Context, rl *relister) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.setAsides.due:
		}
		errs, relist := s.setAsides.take()
		for _, err := range errs {
			s.report(ctx, fmt.Errorf("boltinformer: collection %q: adding indexers: %w; set the records aside, relisting", s.name, err))
			s.opts.Metrics.countReset(s.name, resetReadError)
		}
		if !relist {
			continue
		}
		// A list applied since may have been received in pages. Its end
		// stores no object, so it paid a debt it did not settle. The store
		// owes the relist whatever was applied meanwhile.
		if !s.gate.owes() {
			s.gate.owe()
		}
		var listAfter func() <-chan struct{}
		if d := s.start.walk.Load(); d != nil {
			listAfter = d.end // A relist does not overtake the walk.
		}
		s.relist(ctx, rl, listAfter)
	}
}
