package listrules

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Semantics is how kube-apiserver serves a list request.
type Semantics int

const (
	// Invalid: the server's validation answers 400 Bad Request.
	Invalid Semantics = iota
	// Consistent: resourceVersion "", the newest revision. The watch cache
	// catches up with etcd before it serves one.
	Consistent
	// Any: resourceVersion "0", any revision. A watch cache serves it at its
	// position, which may lag etcd by seconds.
	Any
	// NotOlderThan: a version with resourceVersionMatch NotOlderThan, or
	// without a match and without a limit. A watch cache serves it once it
	// has reached the version, at its position, which may still be older
	// than the newest revision.
	NotOlderThan
	// Exact: a version with resourceVersionMatch Exact, or without a match
	// but with a limit (the legacy exact read). etcd serves it at exactly
	// that revision, however old, until compaction passes it.
	Exact
	// Continue: a continue token. The page is of the first page's revision.
	Continue
)

func (s Semantics) String() string {
	switch s {
	case Consistent:
		return "consistent"
	case Any:
		return "any"
	case NotOlderThan:
		return "not older than"
	case Exact:
		return "exact"
	case Continue:
		return "continue"
	}
	return "invalid"
}

// Of returns how the server serves a list with opts. Invalid comes with
// the reason the server's validation gives.
func Of(opts metav1.ListOptions) (Semantics, error) {
	rv, match := opts.ResourceVersion, opts.ResourceVersionMatch
	switch {
	case match != "" && rv == "":
		return Invalid, fmt.Errorf("resourceVersionMatch %q is forbidden unless resourceVersion is provided", match)
	case opts.Continue != "" && (rv != "" || match != ""):
		return Invalid, fmt.Errorf("continue with resourceVersion %q and resourceVersionMatch %q: specifying either is not allowed when using continue", rv, match)
	case match != "" && match != metav1.ResourceVersionMatchExact && match != metav1.ResourceVersionMatchNotOlderThan:
		return Invalid, fmt.Errorf("resourceVersionMatch %q is not supported", match)
	case match == metav1.ResourceVersionMatchExact && rv == "0":
		return Invalid, fmt.Errorf(`resourceVersionMatch "Exact" is forbidden for resourceVersion "0"`)
	case opts.Continue != "":
		return Continue, nil
	case rv == "":
		return Consistent, nil
	case rv == "0":
		return Any, nil
	case match == metav1.ResourceVersionMatchExact:
		return Exact, nil
	case match == metav1.ResourceVersionMatchNotOlderThan:
		return NotOlderThan, nil
	case opts.Limit > 0:
		return Exact, nil // the legacy exact read
	}
	return NotOlderThan, nil
}

// Relist checks a list made by a client whose store holds the collection
// at resourceVersion held ("" or "0": the store holds nothing yet). Once
// it holds something, a list must be served never older than that and as
// new as the server can serve it: Consistent, or NotOlderThan a version
// at least held. Any may go back in time (a lagging watch cache). Exact
// returns that old revision itself, from which the watch that expired
// expires again. A Continue follows a first page that was checked.
func Relist(opts metav1.ListOptions, held string) error {
	s, err := Of(opts)
	if err != nil {
		return err
	}
	if held == "" || held == "0" {
		return nil
	}
	switch s {
	case Consistent, Continue:
		return nil
	case NotOlderThan:
		at, ok1 := parse(opts.ResourceVersion)
		h, ok2 := parse(held)
		if !ok1 || !ok2 || at < h {
			return fmt.Errorf("a list not older than %q by a store that holds %q may be served older than what the store holds", opts.ResourceVersion, held)
		}
		return nil
	}
	return fmt.Errorf("a list %s (resourceVersion %q, resourceVersionMatch %q, limit %d) by a store that holds %q: not the newest data the server can serve, never older than what the store holds",
		s, opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, held)
}

// SyncTarget checks a list whose resourceVersion is to prove a store
// caught up with the server: synced means the store reflects a read made
// at or after the start. Only a Consistent list is such a read. A list
// NotOlderThan a stored version may be served by a watch cache that lags
// the revision the server had at the start; Any and Exact may be older
// still.
func SyncTarget(opts metav1.ListOptions) error {
	s, err := Of(opts)
	if err != nil {
		return err
	}
	if s != Consistent {
		return fmt.Errorf("a list %s (resourceVersion %q, resourceVersionMatch %q, limit %d) is not a consistent read: it may be older than the server at the start",
			s, opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit)
	}
	return nil
}

func parse(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}
