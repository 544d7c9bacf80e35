package recovery

import (
	"fmt"
	"time"
)

// Options is what a user chooses of recoveries (cache.InformerOptions
// and the factories take it). Zero values are the defaults.
type Options struct {
	// Lister lists metadata and fetches objects. It is required, and
	// Validate names what is missing.
	Lister *Lister
	// Workers bounds the fetch requests in flight. Zero means 4.
	Workers int
	// ListInFull makes every recovery list the whole collection through
	// the Lister, instead of its metadata and then what changed. It suits
	// an informer whose objects are metadata (PartialObjectMetadata). Its
	// full list is no larger than the metadata list and holds the changed
	// objects. Through Lister.ListObjectsWire only the changed items are
	// decoded. Otherwise the pages are decoded whole (ListObjects), and
	// only the writing and delivering of the unchanged objects is saved.
	ListInFull bool
	// OpaqueVersions says the Lister does not vouch that the collection's
	// resourceVersions are etcd revisions. A Lister vouches for that by
	// default, but an aggregated API's server may serve any string. A
	// recovery then tells two resourceVersions only equal or not. An object
	// listed at the stored UID and resourceVersion is unchanged, and any
	// other is applied as listed. OpaqueVersions implies ListInFull, as do
	// resourceVersions that are not integers. Without ordered versions, an
	// object fetched after the list could not be told from an older state
	// the watch brings.
	OpaqueVersions bool
	// Tuning overrides the measured choices of how a recovery lists and
	// fetches. The zero Tuning keeps them all.
	Tuning Tuning
}

// Validate reports what makes o unusable. That is a nil Lister, or a
// Lister without ListMetadata or ListObjects. A nil Options is valid and
// asks for no recovery. Its errors name the fields as the user sets them,
// in cache.InformerOptions.Recovery.
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
// It is for benchmarks and tests that need one path. A wrong value costs
// requests and time, never correctness.
type Tuning struct {
	// FullListFraction is the share of the listed collection that, once
	// changed, is fetched by one list of the collection, not per object.
	// Zero or less means 0.25, where one-object fetches cost as much as a
	// decoded list (e2e TestRecoveryFetchCost). Above 1 means never.
	FullListFraction float64
	// FirstPageFraction is the share of a metadata list's first page that,
	// once changed, turns the recovery into one full list. It applies only
	// with Lister.ListObjectsWire. Zero or less means 0.05, where the full
	// list wins at 100,000 Pods (informerbench recover). Above 1 means never.
	FirstPageFraction float64
	// MaxFetchRequests bounds a recovery's one-object fetch requests. More
	// changed objects are fetched by one list of the collection. Zero
	// derives the bound from Lister.QPS, as what it allows in ten seconds.
	// That bound is at least 64, and there is none where QPS is zero or
	// less. Negative means no bound, whatever the rate limit.
	MaxFetchRequests int
	// NoPageAhead stops a streamed metadata list from asking for its next
	// page while it reads one. False asks ahead, which saves a round trip
	// per page.
	NoPageAhead bool
}

// defaultWorkers is Options.Workers' default. It allows four requests at a
// time, each through the client's rate limiter.
const defaultWorkers = 4

// The tuning of a recovery is what the measurements chose. Tuning overrides
// the first two, and the rest are fixed.
const (
	// fullListFraction changed lists the collection. There one-object
	// fetches cost as much as a decoded list (e2e.TestRecoveryFetchCost).
	fullListFraction = 0.25
	// firstPageFraction changed on a metadata list's first page lists in
	// full. From 4% the full list wins at 100,000 Pods (informerbench recover).
	firstPageFraction = 0.05

	// recoveryPageSize is a metadata page's Limit, as client-go's pager's.
	recoveryPageSize = 500
	// recoveryStreamPageSize is a streamed metadata page's Limit. It holds
	// about 44 MB of realistic Pods' metadata. 100,000 Pods take 20 requests.
	recoveryStreamPageSize = 10000
	// fetchAttempts is how often one fetch request is tried before the
	// recovery gives up. The recovery is then started again after backoff.
	fetchAttempts = 3
	// fetchBudgetTime of a rate-limited lister's rate bounds the fetches.
	// At client-go's 5 QPS, 1,000 fetches would outlast a list.
	fetchBudgetTime = 10 * time.Second
	// minFetchBudget is the least request budget a rate limit leaves.
	minFetchBudget = 64
)
