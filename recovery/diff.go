package recovery

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// diffList is what a recovery's diff is made against. It holds the identity
// of every listed object, and for a full list the objects themselves.
type diffList struct {
	// listedAt is the resourceVersion the list asked for, and rv the one it
	// was served at. pages counts its responses.
	listedAt, rv string
	pages        int
	// given says the list is Hooks.Listed's, a consistent read at "" made
	// before this recovery. It stands in for a list at listedAt.
	given  bool
	listed map[string]listedItem
	// objects are the listed objects by key, undecoded where the server
	// sent protobuf. It is nil for a metadata list.
	objects map[string]wireItem
}

// comparable reports whether every resourceVersion of the list is an
// integer, as the fetches of a recovery need. It parses them on the way.
func (l *diffList) comparable() bool {
	ok := true
	if _, good := parseRV(l.rv); !good {
		ok = false
	}
	for key, it := range l.listed {
		it.n, it.integer = parseRV(it.rv)
		ok = ok && it.integer
		l.listed[key] = it
	}
	return ok
}

// listedItem is one item of a recovery's list.
type listedItem struct {
	uid types.UID
	rv  string
	// n is rv as an integer, if it is one (integer).
	n       uint64
	integer bool
}

// parseRV reads a resourceVersion as an etcd revision.
func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// version reads a resourceVersion as an etcd revision, if the recovery
// compares them (Options.OpaqueVersions).
func (rec *attempt) version(rv string) (uint64, bool) {
	if rec.r.cfg.OpaqueVersions {
		return 0, false
	}
	return parseRV(rv)
}

// setList records the list the diff is made against.
func (rec *attempt) setList(l *diffList) {
	l.comparable() // parses every resourceVersion
	if rec.r.cfg.OpaqueVersions {
		for key, it := range l.listed {
			it.n, it.integer = 0, false
			l.listed[key] = it
		}
	}
	n, ok := rec.version(l.rv)
	rec.listRV, rec.listN, rec.listIntegers, rec.listed = l.rv, n, ok, l.listed
	rec.watchN, rec.watchRV = n, l.rv
	rec.stats.Listed, rec.stats.Pages = len(l.listed), l.pages
	rec.stats.FullList = l.objects != nil
}

// diff compares the listed items with the stored Versions. The store calls
// it in order with its writes (Store.Begin).
func (rec *attempt) diff(stored map[string]Version) (Plan, error) {
	var plan Plan
	fetch := func(key string) {
		rec.pending[key] = struct{}{}
		rec.fetchKeys = append(rec.fetchKeys, key)
	}
	for key, l := range rec.listed {
		s, had := stored[key]
		sn, parsed := rec.version(s.ResourceVersion)
		integers := parsed && l.integer
		sameUID := s.UID == "" || l.uid == "" || s.UID == l.uid
		// resourceVersions that are not integers can only be told equal or
		// not. A full list may hold them.
		sameRV := s.ResourceVersion != "" && s.ResourceVersion == l.rv
		if integers {
			sameRV = sn == l.n
		}
		switch {
		case !had:
			rec.keys[key] = &keyState{gone: true}
			fetch(key)
		case integers && sn > l.n:
			rec.keepAhead(key, s, sn)
		case sameRV && sameUID:
			plan.Unchanged = append(plan.Unchanged, key)
		case !sameUID:
			plan.Deleted = append(plan.Deleted, key)
			rec.keys[key] = &keyState{gone: true}
			fetch(key)
		default:
			rec.keys[key] = &keyState{uid: s.UID, rv: sn}
			fetch(key)
		}
	}
	for key, s := range stored {
		if _, ok := rec.listed[key]; ok {
			continue
		}
		// An object absent from the list is deleted, unless it is newer
		// than the list. A lagging apiserver may serve a list older than
		// what an earlier recovery fetched. Its absence says nothing then.
		if sn, ok := rec.version(s.ResourceVersion); ok && rec.listIntegers && sn > rec.listN {
			rec.keepAhead(key, s, sn)
			continue
		}
		plan.Deleted = append(plan.Deleted, key)
	}
	slices.Sort(plan.Deleted)
	slices.Sort(plan.Unchanged)
	slices.Sort(rec.fetchKeys)
	rec.stats.Unchanged, rec.stats.Deleted, rec.stats.Fetch = len(plan.Unchanged), len(plan.Deleted), len(rec.pending)
	rec.listed = nil // not needed any more
	return plan, nil
}

// keepAhead keeps the stored object at key, at resourceVersion sn, newer
// than the list. An earlier recovery fetched it and did not finish. The
// watch from the list's resourceVersion brings every later change of it,
// its deletion included. The store is consistent only once that watch has
// passed sn, so the recovery ends no earlier (mark).
func (rec *attempt) keepAhead(key string, s Version, sn uint64) {
	rec.keys[key] = &keyState{uid: s.UID, rv: sn}
	rec.mark = max(rec.mark, sn)
	rec.stats.Ahead++
}
