package main

// The measured variants, by the names results use. client-go runs with its
// default WatchListClient gate (on in v0.37: the initial state streams over
// a watch) and with the gate off (a LIST), in both wire formats.
const (
	vClientGoProto     = "client-go-protobuf"
	vClientGoProtoList = "client-go-protobuf-list"
	vBoltCold          = "bolt-cold"
	vBoltWarm          = "bolt-warm"
	// vBoltWarmAtOpen is a warm restart with InformerOptions.SyncedAtOpen:
	// synced on the stored state, before the watch has caught up.
	vBoltWarmAtOpen = "bolt-warm-at-open"
	vBoltBounded    = "bolt-bounded"
	// vBolt410 is a restart after a forced 410 without
	// InformerOptions.Recovery: a full relist through the store.
	vBolt410 = "bolt-410"
	// vBoltRecover is bolt-warm's informer with InformerOptions.Recovery
	// (a metadata lister of the same Pods), restarted after a forced 410:
	// it recovers by what changed.
	vBoltRecover = "bolt-recover"
	// vBoltRecoverFull is bolt-recover whose lister refuses metadata
	// lists (406, as an aggregated API may): the recovery reads one full
	// list, taking every item's identity from its bytes, and decodes only
	// what changed — the full-list fallback.
	vBoltRecoverFull = "bolt-recover-full"
)

// boundedCacheObjects is the decoded-object cache of the bounded variant.
const boundedCacheObjects = 1000

// variantOrder is every name --variants takes, in the order of the
// report's rows of informer starts.
var variantOrder = []string{
	vClientGoProto, vClientGoProtoList,
	vBoltCold, vBoltWarm, vBoltWarmAtOpen, vBoltBounded, vBoltRecover, vBolt410,
}

// boltFileVariants need a cache file that a cold start filled: when
// bolt-cold is not selected, an unrecorded cold start makes it.
var boltFileVariants = []string{vBoltWarm, vBoltWarmAtOpen, vBoltBounded, vBoltRecover, vBolt410}

var variantTitles = map[string]string{
	vClientGoProto:     "client-go protobuf cold, watch-list (default)",
	vClientGoProtoList: "client-go protobuf cold, LIST",
	vBoltCold:          "boltinformer cold (empty file)",
	vBoltWarm:          "boltinformer warm restart (synced when caught up)",
	vBoltWarmAtOpen:    "boltinformer warm restart, SyncedAtOpen",
	vBoltBounded:       "boltinformer warm, 1,000-object cache",
	vBoltRecover:       "boltinformer restart after 410, recovering what changed",
	vBolt410:           "boltinformer restart after 410, full relist (fallback)",
}
