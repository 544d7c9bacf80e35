package main

import (
	"fmt"

	"github.com/boltinformer/boltinformer/internal/bench/runstats"
)

// Metric names, as the CSV and JSON results carry them.
const (
	mSync        = "sync_s"
	mCaughtUp    = "caught_up_s"
	mDurable     = "durable_s"
	mReconcile   = "reconcile_s"
	mLists       = "lists"
	mProbes      = "limit1_reads"
	mWatches     = "watches"
	mWatchLists  = "watch_lists"
	mRewritten   = "rewritten"
	mRSS         = "rss_mib"
	mPeakRSS     = "peak_rss_mib"
	mAnon        = "rss_anon_mib"
	mFileRSS     = "rss_file_mib"
	mHeap        = "heap_mib"
	mFile        = "file_mib"
	mRecords     = "records_mib"
	mProto       = "protobuf_mib"
	mWireMiB     = "start_wire_mib"
	mBodyMiB     = "start_body_mib"
	mAPICPU      = "start_apiserver_cpu_s"
	mEtcdCPU     = "start_etcd_cpu_s"
	mStartLists  = "start_lists"
	mStartProbes = "start_limit1_reads"
	// A recovery's requests during the start (not in start_lists):
	// metadata-list pages, and lists of one object or one namespace.
	mStartMetaLists = "start_metadata_lists"
	mStartFetches   = "start_fetches"
	// The bytes (as encoded) of the metadata list and of the fetches.
	mMetaMiB  = "start_metadata_mib"
	mFetchMiB = "start_fetch_mib"
	// The informer process's own CPU seconds during the start.
	mClientCPU = "start_client_cpu_s"

	// A recovery (boltinformer with Recovery), as the reflector reported
	// it: construction to the store consistent; the metadata list's
	// objects found unchanged, gone (or replaced), and new or changed; the
	// fetch requests and the objects they applied.
	mRecovered    = "recovered_s"
	mRecUnchanged = "recovery_unchanged"
	mRecDeleted   = "recovery_deleted"
	mRecToFetch   = "recovery_to_fetch"
	mRecRequests  = "recovery_requests"
	mRecFetched   = "recovery_fetched"
	mRecDurationS = "recovery_duration_s"
	mRecListS     = "recovery_list_s"
	// The first watch that failed (the 410) to the recovery's metadata
	// list: a backoff (none after a start's own 410), or the wait for the
	// warm hand-off where the list waited for it (before 2026-11-26 19:00).
	mRecAfterWatchError = "recovery_after_watch_error_s"

	// The stages of a start (start.go). sync_s above is the last of them:
	// every handler registration synced.
	mInformerSynced = "informer_synced_s"
	mFirstList      = "first_list_s"
	mConstruct      = "construct_s"
	mHandlerSynced  = "handler%d_synced_s" // per registration, from 1
	// Boltinformer only: construction to the first watch the apiserver
	// accepted; informer synced minus that (negative: synced before the
	// watch opened, as with SyncedAtOpen); watches accepted by then.
	mFirstWatch       = "first_watch_s"
	mSyncedAfterWatch = "synced_after_watch_s"
	mWatchesAtSync    = "watches_at_sync"
)

// metrics flattens a result into named numbers; optional parts contribute
// only when measured.
func (r *childResult) metrics() map[string]float64 {
	m := map[string]float64{
		mSync:       r.SyncSeconds,
		mLists:      float64(r.Lists),
		mProbes:     float64(r.Probes),
		mWatches:    float64(r.Watches),
		mWatchLists: float64(r.WatchLists),
		mRSS:        mib(r.RSSBytes),
		mPeakRSS:    mib(r.PeakRSSBytes),
		mAnon:       mib(r.AnonBytes),
		mFileRSS:    mib(r.FileRSSBytes),
		mHeap:       mib(r.HeapBytes),
	}
	m[mWireMiB], m[mBodyMiB], m[mStartLists] = mib(r.Cost.WireBytes), mib(r.Cost.BodyBytes), float64(r.Cost.Lists)
	m[mStartProbes] = float64(r.Cost.Probes)
	m[mStartMetaLists], m[mStartFetches] = float64(r.Cost.MetaLists), float64(r.Cost.Fetches)
	if r.Cost.MetaLists > 0 || r.Cost.Fetches > 0 {
		m[mMetaMiB], m[mFetchMiB] = mib(r.Cost.MetaBodyBytes), mib(r.Cost.FetchBodyBytes)
	}
	if r.Cost.ClientCPUs > 0 {
		m[mClientCPU] = r.Cost.ClientCPUs
	}
	if rec := r.Recovery; rec != nil {
		m[mRecovered], m[mRecDurationS] = rec.Seconds, rec.DurationSeconds
		if rec.ListSeconds > 0 { // results from before it was timed have none
			m[mRecListS] = rec.ListSeconds
		}
		m[mRecUnchanged], m[mRecDeleted], m[mRecToFetch] = float64(rec.Unchanged), float64(rec.Deleted), float64(rec.ToFetch)
		m[mRecRequests], m[mRecFetched] = float64(rec.Requests), float64(rec.Fetched)
		if r.WatchErrorSeconds > 0 {
			m[mRecAfterWatchError] = rec.Seconds - rec.DurationSeconds - r.WatchErrorSeconds
		}
	}
	if r.Cost.APIServerCPUs >= 0 && r.Cost.EtcdCPUs >= 0 {
		m[mAPICPU], m[mEtcdCPU] = r.Cost.APIServerCPUs, r.Cost.EtcdCPUs
	}
	if r.InformerSyncedSeconds > 0 { // results from before the stages were timed have none
		m[mInformerSynced], m[mFirstList], m[mConstruct] = r.InformerSyncedSeconds, r.FirstListSeconds, r.ConstructSeconds
		for i, x := range r.HandlerSyncedSeconds {
			m[fmt.Sprintf(mHandlerSynced, i+1)] = x
		}
		if r.FirstWatchSeconds > 0 {
			m[mFirstWatch] = r.FirstWatchSeconds
			m[mSyncedAfterWatch] = r.InformerSyncedSeconds - r.FirstWatchSeconds
			m[mWatchesAtSync] = float64(r.WatchesAtSync)
		}
	}
	if r.StartCause != "" {
		m[mDurable] = r.DurableSeconds
		m[mRewritten] = float64(r.Rewritten)
	}
	if r.CaughtUpSeconds > 0 {
		m[mCaughtUp] = r.CaughtUpSeconds
	}
	if r.ReconcileSeconds > 0 {
		m[mReconcile] = r.ReconcileSeconds
	}
	if r.FileBytes > 0 {
		m[mFile], m[mRecords], m[mProto] = mib(r.FileBytes), mib(r.RecordBytes), mib(r.ProtoBytes)
	}
	return m
}

// medians takes, for every metric, the median over the runs that have it.
func medians(runs []*childResult) map[string]float64 {
	values := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r.metrics() {
			values[k] = append(values[k], v)
		}
	}
	out := make(map[string]float64, len(values))
	for k, vs := range values {
		out[k] = runstats.Median(vs)
	}
	return out
}
