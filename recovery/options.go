package recovery

import (
	"fmt"
	"time"
)

// Options is what a user chooses of recoveries (cache.InformerOptions
// and the factories take it). Zero values are the defaults.
type Options struct {
	// Lister lists metadata and fetches objects. Required: Validate
	// names what is missing.
	Lister *Lister
	// Workers bounds the fetch requests in flight. Zero: 4.
	Workers int
	// ListInFull makes every recovery list the whole collection through
	// the Lister instead of its metadata and then what changed: where the
	// informer's objects are metadata (PartialObjectMetadata), its full
	// list is no larger than the metadata list and holds the changed
	// objects. Through Lister.ListObjectsWire only the changed items are
	// decoded. Otherwise the pages are decoded whole (ListObjects), and
	// only the writing and delivering of the unchanged objects is saved.
	ListInFull bool
	// OpaqueVersions says the Lister does not vouch that the collection's
	// resourceVersions are etcd revisions (a Lister does by default): an
	// aggregated API's server may serve any string. A recovery then tells
	// two resourceVersions only equal or not — an object listed at the
	// stored UID and resourceVersion is unchanged, any other is applied as
	// listed — and lists in full (as for resourceVersions that are not
	// integers): OpaqueVersions implies ListInFull, since without ordered
	// versions an object fetched after the list could not be told from an
	// older state the watch brings.
	OpaqueVersions bool
	// Tuning overrides the measured choices of how a recovery lists and
	// fetches. The zero Tuning keeps them all.
	Tuning Tuning
}

// Validate reports what makes o unusable: a nil Lister, or a Lister
// without ListMetadata or ListObjects. A nil Options is valid: it asks
// for no recovery. Its errors name the fields as the user sets them, in
// cache.InformerOptions.Recovery.
func (o *Options) Validate() error {
	const how = "set it, or leave Recovery nil to relist in full as client-go does"
	switch {
	case o == nil:
		return nil
	case o.Lister == nil:
		return fmt.Errorf("Recovery.Lister is nil: %s", how)
	case o.Lister.ListMetadata == nil:
		return fmt.Errorf("Recovery.Lister.ListMetadata is nil: %s", how)
	case o.Lister.ListObjects == nil:
		return fmt.Errorf("Recovery.Lister.ListObjects is nil: %s", how)
	}
	return nil
}

// Tuning overrides a recovery's measured choices. Each zero field keeps
// the default its comment names, and with it the measurement that set it.
// It is for benchmarks and tests that need one path; a wrong value costs
// requests and time, never correctness.
type Tuning struct {
	// FullListFraction is the share of the listed collection that, once
	// changed, is fetched by one list of the collection, not per object.
	// Zero or less: 0.25, where one-object fetches cost as much as a
	// decoded list (e2e TestRecoveryFetchCost). Above 1: never.
	FullListFraction float64
	// FirstPageFraction is the share of a metadata list's first page that,
	// once changed, turns the recovery into one full list (with
	// Lister.ListObjectsWire only).
	// Zero or less: 0.05, where the full list wins at 100,000 Pods
	// (informerbench recover). Above 1: never.
	FirstPageFraction float64
	// MaxFetchRequests bounds a recovery's one-object fetch requests; more
	// changed objects are fetched by one list of the collection. Zero:
	// derived from Lister.QPS (what it allows in ten seconds, at least
	// 64), unbounded where QPS is zero or less. Negative: no
	// bound, whatever the rate limit.
	MaxFetchRequests int
	// NoPageAhead stops a streamed metadata list from asking for its next
	// page while it reads one. False: it asks ahead, which saves a round
	// trip per page.
	NoPageAhead bool
}

// defaultWorkers is Options.Workers' default: four requests at a time,
// each through the client's rate limiter.
const defaultWorkers = 4

// The tuning of a recovery: what the measurements chose. Tuning overrides
// the first two; the rest are fixed.
const (
	// fullListFraction changed lists the collection: e2e.TestRecoveryFetchCost, one-object fetches match a decoded list at a quarter.
	fullListFraction = 0.25
	// firstPageFraction changed on a metadata list's first page lists in full: informerbench recover at 100,000 Pods, the full list wins from 4%.
	firstPageFraction = 0.05

	// recoveryPageSize is a metadata page's Limit, as client-go's pager's.
	recoveryPageSize = 500
	// recoveryStreamPageSize is a streamed metadata page's Limit: about 44 MB of realistic Pods' metadata, 20 requests for 100,000.
	recoveryStreamPageSize = 10000
	// fetchAttempts is how often one fetch request is tried before the
	// recovery gives up (and is started again after backoff).
	fetchAttempts = 3
	// fetchBudgetTime of a rate-limited lister's rate bounds the fetches: at client-go's 5 QPS, 1,000 fetches would outlast a list.
	fetchBudgetTime = 10 * time.Second
	// minFetchBudget is the least request budget a rate limit leaves.
	minFetchBudget = 64
)
