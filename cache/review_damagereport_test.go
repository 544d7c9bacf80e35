package cache_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/internal/testing/metrictest"
)

// A collection whose structure is damaged is emptied when the informer's
// constructor opens it (persist's Collection.DamageSetAside). The informer
// starts cold. That is stored state set aside instead of resumed, as a
// journal that cannot be read is (TestWarmStartCorruptJournalRelists). The
// informer must report it to its watch error handler. It must count it in
// boltinformer_collection_resets_total, whose help names read_error for
// state that "could not be read back".
func TestDamagedCollectionIsReportedByTheInformer(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	bdb, err := bolt.Open(f.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(format.CollectionsBucket).Bucket([]byte("pods")).DeleteBucket(format.IndexesBucket)
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	f.open()

	reg := prometheus.NewRegistry()
	m, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{Metrics: m}, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with %v, want the source's %v", got, want)
	}
	if err := r.inf.Indexer().Collection().DamageSetAside(); err == nil {
		t.Fatal("the collection was not found damaged: the test damaged nothing")
	}
	r.stop()
	select {
	case err := <-r.errs:
		t.Logf("reported: %v", err)
	default:
		t.Errorf("the damaged collection, emptied at open, was not reported to the watch error handler")
	}
	var total float64
	for _, reason := range []string{"read_error", "list_identity", "cluster", "transform", "queue_mode", "unrecorded", "unencodable"} {
		if v := metrictest.CounterValue(t, reg, "boltinformer_collection_resets_total", map[string]string{"collection": "pods", "reason": reason}); v > 0 {
			total += v
		}
	}
	if total == 0 {
		t.Errorf("boltinformer_collection_resets_total counts no reset of the damaged collection's stored state")
	}
}
