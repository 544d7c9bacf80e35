package main

import "os"

// The parent–child protocol. The parent starts `informerbench child` and
// writes one childSpec as a line of JSON to its stdin. The child ends by
// printing one childResult as JSON. (A churn child prints READY once
// synced: churnspawn.go.)

const (
	childCommand = "child"
	readyLine    = "READY"

	// watchListEnv is client-go's environment override of its
	// WatchListClient feature gate (on by default in v0.37).
	watchListEnv = "KUBE_FEATURE_WatchListClient"

	informerClientGo = "client-go"
	informerBolt     = "boltinformer"
)

// listEnv is the environment of a client-go child that LISTs: this
// process's, with the WatchListClient gate off.
func listEnv() []string { return append(os.Environ(), watchListEnv+"=false") }

// childSpec says what one child process measures.
type childSpec struct {
	Variant    string `json:"variant"`
	Informer   string `json:"informer"` // informerClientGo or informerBolt
	Kubeconfig string `json:"kubeconfig"`
	Selector   string `json:"selector"`
	// NoWatchList turns client-go's WatchListClient gate off: it lists.
	NoWatchList bool `json:"noWatchList,omitempty"`
	// Expect is how many initial adds make the informer synced.
	Expect int `json:"expect"`
	// APIServerPID and EtcdPID, if known (a local apiserver), let the child
	// measure the CPU they spend while it starts.
	APIServerPID int `json:"apiserverPid,omitempty"`
	EtcdPID      int `json:"etcdPid,omitempty"`

	// File is boltinformer's cache file; Fresh removes it first (cold start).
	File         string `json:"file,omitempty"`
	Fresh        bool   `json:"fresh,omitempty"`
	CacheObjects int    `json:"cacheObjects,omitempty"`
	// SyncedAtOpen sets InformerOptions.SyncedAtOpen: a warm start is
	// synced on the stored state instead of once caught up.
	SyncedAtOpen bool `json:"syncedAtOpen,omitempty"`
	// CatchUpRV: after sync, wait until the store has applied this
	// resourceVersion (the last change made while the informer was down).
	CatchUpRV string `json:"catchUpRV,omitempty"`
	// WaitRelist waits, after sync, for the relist that an expired
	// resourceVersion forces and for its reconciliation with the file;
	// with Recovery, for the recovery to end (recovery.Observer.Recovered).
	WaitRelist bool `json:"waitRelist,omitempty"`
	// Recovery gives the boltinformer InformerOptions.Recovery: a metadata
	// lister (factory.NewMetadataLister) of the same Pods and selector, so
	// that a 410, or a list the file owes, recovers by what changed.
	Recovery bool `json:"recovery,omitempty"`
	// RecoveryFullList (with Recovery) makes that lister refuse metadata
	// lists, so that recoveries take the full-list fallback.
	RecoveryFullList bool `json:"recoveryFullList,omitempty"`
	// RecoveryWithout (with Recovery) names a fast path the recovery runs
	// without (recoverLayers).
	RecoveryWithout string `json:"recoveryWithout,omitempty"`
	// WarmListBelow is InformerOptions.WarmListBelow (with Recovery).
	WarmListBelow int `json:"warmListBelow,omitempty"`
	// NewKeys is how many Pods were created while a boltinformer was down:
	// its workqueue handler, which queues the stored keys and every key
	// it is told of, may hold up to that many keys beyond Expect.
	NewKeys int `json:"newKeys,omitempty"`
	// FileSize compares the file with the objects' protobuf size.
	FileSize bool `json:"fileSize,omitempty"`
	// Snapshot, if set, is where a hot snapshot of the file is written.
	Snapshot string `json:"snapshot,omitempty"`

	// ProfilePrefix, if set, makes the child write <prefix>-<phase>.pprof.
	ProfilePrefix string `json:"profilePrefix,omitempty"`
}

// childResult is what a child measured.
type childResult struct {
	Variant string `json:"variant"`
	// SyncSeconds: informer construction (file open included) to every
	// handler registration's HasSynced: each handler has received every
	// initial add (the child registers two). Results from before there
	// were two handlers timed the one registration.
	SyncSeconds float64 `json:"syncSeconds"`
	// ConstructSeconds: informer construction (file open included) and
	// AddEventHandler calls, up to Run.
	ConstructSeconds float64 `json:"constructSeconds,omitempty"`
	// InformerSyncedSeconds: construction to the informer's own
	// HasSyncedChecker (the store is complete; listers may serve).
	InformerSyncedSeconds float64 `json:"informerSyncedSeconds,omitempty"`
	// FirstListSeconds: construction to the return of a GetIndexer().List()
	// started as soon as the informer reported synced (its length is
	// checked against Expect).
	FirstListSeconds float64 `json:"firstListSeconds,omitempty"`
	// FirstWatchSeconds (boltinformer): construction to the first watch
	// the apiserver accepted (reflector.Observer.WatchStarted). A warm
	// start synced when caught up is synced InformerSyncedSeconds -
	// FirstWatchSeconds after its watch opened.
	FirstWatchSeconds float64 `json:"firstWatchSeconds,omitempty"`
	// WatchErrorSeconds (boltinformer): construction to the end of the
	// first watch that failed (a 410 when the stored resourceVersion is
	// expired); 0 if none did.
	WatchErrorSeconds float64 `json:"watchErrorSeconds,omitempty"`
	// WatchesAtSync (boltinformer): watches the apiserver had accepted
	// when the informer reported synced (a catching-up start's are short).
	WatchesAtSync int `json:"watchesAtSync,omitempty"`
	// HandlerSyncedSeconds: construction to each registration's
	// HasSyncedChecker, in registration order; the largest is SyncSeconds.
	HandlerSyncedSeconds []float64 `json:"handlerSyncedSeconds,omitempty"`

	InitialAdds int `json:"initialAdds"`
	// CaughtUpSeconds: start to CatchUpRV applied (the changes made while
	// the informer was down), polled from Run on. Results from before
	// 2026-11-24 began polling only once every handler had synced, so
	// theirs is at least that time.
	CaughtUpSeconds float64 `json:"caughtUpSeconds,omitempty"`
	// DurableSeconds: start to the synced (and caught-up, reconciled) state
	// committed to the file.
	DurableSeconds float64 `json:"durableSeconds,omitempty"`
	// ReconcileSeconds: start to the 410 relist applied (WaitRelist).
	ReconcileSeconds float64 `json:"reconcileSeconds,omitempty"`
	StartCause       string  `json:"startCause,omitempty"`
	// Causes lists every list or resume of the reflector, in order: a
	// warm start is "resumed", followed by "relist-catchup" if its short
	// watches did not catch it up, or "relist-expired" after a 410.
	Causes []string `json:"causes,omitempty"`
	// Requests for Pods: full LISTs (GET without watch, every page, but
	// not the limit=1 consistent reads), the limit=1 consistent reads at
	// resourceVersion "" a catching-up warm start takes (Probes: one
	// request, at most one object returned), watches, and watches with
	// sendInitialEvents (client-go's watch-list).
	Lists      int64 `json:"lists"`
	Probes     int64 `json:"limit1Reads"`
	Watches    int64 `json:"watches"`
	WatchLists int64 `json:"watchLists"`
	// MetaLists and Fetches: a recovery's metadata-list pages and its
	// lists of one object or one namespace (podRequests), not in Lists.
	MetaLists int64 `json:"metadataLists,omitempty"`
	Fetches   int64 `json:"fetches,omitempty"`
	// Recovery (boltinformer with Recovery): the last recovery the
	// reflector reported (recovery.Observer.Recovered); nil if none ended.
	Recovery *recoveryResult `json:"recovery,omitempty"`
	// Rewritten: changes committed to the file during the run.
	Rewritten int64 `json:"rewritten"`

	// Cost is what the start cost the control plane (see startCost).
	Cost startCost `json:"cost"`

	RSSBytes     uint64 `json:"rssBytes"`     // VmRSS after sync and a GC
	PeakRSSBytes uint64 `json:"peakRssBytes"` // VmHWM
	AnonBytes    uint64 `json:"anonBytes"`    // RssAnon: VmRSS without mapped files
	FileRSSBytes uint64 `json:"fileRssBytes"` // RssFile: mapped file pages (the cache file)
	HeapBytes    uint64 `json:"heapBytes"`    // live heap after a GC

	FileBytes   int64 `json:"fileBytes,omitempty"`
	RecordBytes int64 `json:"recordBytes,omitempty"`
	ProtoBytes  int64 `json:"protoBytes,omitempty"`
}

// recoveryResult is one recovery as the reflector reported it
// (recovery.Stats), and when.
type recoveryResult struct {
	// Cause is why it recovered: relist-expired after a 410, relist-error
	// for a list the collection owed.
	Cause string `json:"cause"`
	// Seconds: informer construction to the store consistent at the
	// recovery's resourceVersion.
	Seconds float64 `json:"seconds"`
	// Count is how many recoveries ended during the measured start.
	Count int `json:"count"`
	// The metadata list's items and pages.
	Listed int `json:"listed"`
	Pages  int `json:"pages"`
	// How the stored and listed keys compared: unchanged; gone or replaced
	// by another UID; new, changed or replaced (to fetch); stored newer
	// than the list.
	Unchanged int `json:"unchanged"`
	Deleted   int `json:"deleted"`
	ToFetch   int `json:"toFetch"`
	Ahead     int `json:"ahead,omitempty"`
	// The fetch requests; the objects they returned that were applied;
	// fetched objects and watch events dropped as not newer than the store.
	Requests int `json:"requests"`
	Fetched  int `json:"fetched"`
	Skipped  int `json:"skipped"`
	// DurationSeconds: the metadata list to the store's consistency;
	// ListSeconds: its part until the list's diff was applied.
	DurationSeconds float64 `json:"durationSeconds"`
	ListSeconds     float64 `json:"listSeconds,omitempty"`
}
