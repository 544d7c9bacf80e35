package cache

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

// Metrics exports boltinformer's metrics, all prefixed boltinformer_, on a
// prometheus.Registerer the caller owns. Nothing registers on a global.
// Labels are bounded by what the program creates.
//
//   - file is the base name of each cache file.
//   - collection has one value per informer.
//   - resource has one per informer a factory could not persist.
//   - cause and reason have a few documented values each.
//   - handler has one per registered handler.
//   - checkpoint has one per open checkpoint.
//
// Pass it to informers with InformerOptions.Metrics and to files with
// ObserveDB. Pass it to the factories with factory.PersistenceOptions.Metrics
// and to the controller-runtime adapter with its Options.Metrics. A running
// informer's handlers (pending notifications) and open checkpoints are
// exported wherever its objects are. Its collection's metrics are exported
// only while the objects are in the file. They are objects, resourceVersion
// lag, decoded cache and read errors. A memory-only informer, or one that
// moved to memory, has none. Metrics also implements client-go's
// cache.InformerMetricsProvider for the RealFIFO. That covers queue depth,
// handler latency and store resourceVersion. Those are published only for
// informers with a reserved Identifier, as in client-go.
type Metrics struct {
	commitDuration *prometheus.HistogramVec
	commitChanges  *prometheus.HistogramVec
	commitErrors   *prometheus.CounterVec
	starts         *prometheus.CounterVec
	watchRestarts  *prometheus.CounterVec
	queued         *prometheus.GaugeVec
	processing     *prometheus.HistogramVec
	storeRV        *prometheus.GaugeVec
	resets         *prometheus.CounterVec
	indexRepairs   *prometheus.CounterVec
	droppedCPs     *prometheus.CounterVec
	fallbacks      *prometheus.CounterVec
	crFallbacks    *prometheus.CounterVec

	// mu guards the fields below, read at scrape time.
	mu        sync.Mutex
	dbs       map[*persist.DB]bool
	informers map[*Informer]bool
}

var (
	descFileBytes = prometheus.NewDesc("boltinformer_file_bytes",
		"Size of the cache file.", []string{"file"}, nil)
	descObjects = prometheus.NewDesc("boltinformer_objects",
		"Objects in the collection.", []string{"collection"}, nil)
	descRVLag = prometheus.NewDesc("boltinformer_resource_version_lag",
		"Applied resourceVersion minus the one committed to the file (0 when in sync; resourceVersions are compared as integers).", []string{"collection"}, nil)
	descPending = prometheus.NewDesc("boltinformer_pending_notifications",
		"Notifications queued for a handler and not yet handled. client-go's buffers are unbounded: a stalled handler shows here.", []string{"collection", "handler"}, nil)
	descCacheHits = prometheus.NewDesc("boltinformer_decoded_cache_hits_total",
		"Reads served from the decoded-object cache.", []string{"collection"}, nil)
	descCacheMisses = prometheus.NewDesc("boltinformer_decoded_cache_misses_total",
		"Reads that missed the decoded-object cache.", []string{"collection"}, nil)
	descReadErrors = prometheus.NewDesc("boltinformer_read_errors_total",
		"Reads of the cache file that failed (each attempt); never served as absent objects.", []string{"collection"}, nil)
	descCheckpointAcked = prometheus.NewDesc("boltinformer_checkpoint_acknowledged_keys",
		"Keys the checkpoint's handler has acknowledged (see cache.Checkpoint).", []string{"collection", "checkpoint"}, nil)
	descCheckpointTombstones = prometheus.NewDesc("boltinformer_checkpoint_tombstones",
		"Deletions of acknowledged objects the checkpoint's handler has not acknowledged: given to it as DeletedFinalStateUnknown when it joins.", []string{"collection", "checkpoint"}, nil)
	descCheckpointSkipped = prometheus.NewDesc("boltinformer_checkpoint_skipped_initial_adds_total",
		"Initial adds the checkpoint's handler was not given because it had acknowledged the object at its stored resourceVersion.", []string{"collection", "checkpoint"}, nil)
	descCheckpointSkippedRelisted = prometheus.NewDesc("boltinformer_checkpoint_skipped_relist_updates_total",
		"A relist's updates of objects whose resourceVersion it did not change that the checkpoint's handler was not given because it had acknowledged them at that version.", []string{"collection", "checkpoint"}, nil)
	descCheckpointOverflows = prometheus.NewDesc("boltinformer_checkpoint_overflows_total",
		"Times the checkpoint was cleared because its handler left more deletions unacknowledged than persist.Options.MaxTombstones allows.", []string{"collection", "checkpoint"}, nil)
)

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		commitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boltinformer_commit_duration_seconds",
			Help:    "Duration of group commits (one bbolt transaction, fsync included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"file"}),
		commitChanges: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boltinformer_commit_changes",
			Help:    "Changes written per group commit, across the file's collections.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, []string{"file"}),
		commitErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_commit_errors_total",
			Help: "Group commits that failed; their changes stay in memory and are retried.",
		}, []string{"file"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_informer_starts_total",
			Help: "Informer starts by cause: cold (listed into an empty collection), resumed (watched from the stored resourceVersion), relist-expired (relisted after 410), relist-catchup (relisted because short watches did not catch up with the start's consistent read: the server sends no bookmarks), relist-error (relisted after another failure).",
		}, []string{"collection", "cause"}),
		watchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_watch_restarts_total",
			Help: "Watches that ended, normally (timeout, server closed) or with an error.",
		}, []string{"collection", "outcome"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "boltinformer_queued_items",
			Help: "Deltas queued in the informer's RealFIFO (client-go InformerMetricsProvider).",
		}, []string{"name", "resource"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boltinformer_processing_duration_seconds",
			Help:    "Time to apply a popped delta to the store and hand it to handlers (client-go InformerMetricsProvider).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"name", "resource"}),
		storeRV: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "boltinformer_store_resource_version",
			Help: "Resource version of the store (client-go InformerMetricsProvider).",
		}, []string{"name", "resource"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_collection_resets_total",
			Help: "Stored state set aside instead of resumed, by reason: list_identity, cluster, transform, queue_mode (stored under another list, cluster, transform or queue), unrecorded (written before provenance was recorded), read_error (could not be read back; started cold), unencodable (an object could not be stored; the informer went on in memory).",
		}, []string{"collection", "reason"}),
		indexRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_index_repairs_total",
			Help: "Stored objects whose stored index entries differed from what the index functions give now, found and rewritten during a warm start.",
		}, []string{"collection"}),
		droppedCPs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_checkpoints_dropped_total",
			Help: "Stored checkpoints dropped when the collection opened because none had opened them for persist.Options.CheckpointRetention (abandoned: a renamed or removed handler).",
		}, []string{"collection"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_factory_fallbacks_total",
			Help: "Informers the typed factory's InformerFor runs in memory, as client-go's, instead of persisting (they start cold every time), by reason: client-go-layout (client-go's informer does not have the private fields of the version boltinformer was built against: reported as an error; pin client-go or upgrade boltinformer), not-client-go (the constructor's informer is another implementation), custom-lister-watcher (its ListerWatcher is not client-go's own and no version was declared), unknown-list (what it lists could not be determined).",
		}, []string{"resource", "reason"}),
		crFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boltinformer_controllerruntime_fallbacks_total",
			Help: "Handlers the controller-runtime adapter could not examine, by reason: handler-layout (controller-runtime's source handler does not have the private fields of the version boltinformer was built against, so a checkpoint's acknowledged initial adds are decoded and dropped by its predicate instead of skipped as they are queued: reported as an error).",
		}, []string{"collection", "reason"}),
		dbs:       map[*persist.DB]bool{},
		informers: map[*Informer]bool{},
	}
	for _, c := range []prometheus.Collector{m.commitDuration, m.commitChanges, m.commitErrors, m.starts, m.watchRestarts, m.queued, m.processing, m.storeRV, m.resets, m.indexRepairs, m.droppedCPs, m.fallbacks, m.crFallbacks, scrapeCollector{m}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveDB exports db's commit latency, batch sizes, errors and file size.
func (m *Metrics) ObserveDB(db *persist.DB) {
	file := filepath.Base(db.Path())
	duration, changes, errs := m.commitDuration.WithLabelValues(file), m.commitChanges.WithLabelValues(file), m.commitErrors.WithLabelValues(file)
	db.AddCommitObserver(func(s persist.CommitStats) {
		if s.Err != nil {
			errs.Inc()
			return
		}
		duration.Observe(s.Duration.Seconds())
		changes.Observe(float64(s.Changes))
	})
	m.mu.Lock()
	m.dbs[db] = true
	m.mu.Unlock()
}

func (m *Metrics) addInformer(s *Informer) {
	m.mu.Lock()
	m.informers[s] = true
	m.mu.Unlock()
}

func (m *Metrics) removeInformer(s *Informer) {
	m.mu.Lock()
	delete(m.informers, s)
	m.mu.Unlock()
}

// countReset counts a collection whose stored state was set aside.
func (m *Metrics) countReset(collection, reason string) {
	if m != nil {
		m.resets.WithLabelValues(collection, reason).Inc()
	}
}

// CountFactoryFallback counts an informer a factory of package factory runs
// in memory instead of persisting. resource is what it lists. reason is one
// of those boltinformer_factory_fallbacks_total documents. A nil m counts
// nothing.
func (m *Metrics) CountFactoryFallback(resource, reason string) {
	if m != nil {
		m.fallbacks.WithLabelValues(resource, reason).Inc()
	}
}

// CountControllerRuntimeFallback counts a handler the controller-runtime
// adapter could not examine on the informer of collection. reason is one of
// those boltinformer_controllerruntime_fallbacks_total documents. A nil m
// counts nothing.
func (m *Metrics) CountControllerRuntimeFallback(collection, reason string) {
	if m != nil {
		m.crFallbacks.WithLabelValues(collection, reason).Inc()
	}
}

// countDroppedCheckpoints counts checkpoints dropped as abandoned.
func (m *Metrics) countDroppedCheckpoints(collection string, n int) {
	if m != nil && n > 0 {
		m.droppedCPs.WithLabelValues(collection).Add(float64(n))
	}
}

// countIndexRepairs counts objects whose index entries were rewritten.
func (m *Metrics) countIndexRepairs(collection string, n int) {
	if m != nil && n > 0 {
		m.indexRepairs.WithLabelValues(collection).Add(float64(n))
	}
}

// observer returns the reflector observer counting starts and watch
// restarts for a collection, chained before next (which may be nil).
func (m *Metrics) observer(collection string, next reflector.Observer) reflector.Observer {
	return metricsObserver{m: m, collection: collection, next: next}
}

type metricsObserver struct {
	m          *Metrics
	collection string
	next       reflector.Observer
}

func (o metricsObserver) Resumed(rv string) {
	o.m.starts.WithLabelValues(o.collection, string(reflector.CauseResumed)).Inc()
	if o.next != nil {
		o.next.Resumed(rv)
	}
}

func (o metricsObserver) Listed(cause reflector.StartCause, rv string, items, pages int) {
	o.m.starts.WithLabelValues(o.collection, string(cause)).Inc()
	if o.next != nil {
		o.next.Listed(cause, rv, items, pages)
	}
}

// Recovered passes a recovery's end on to the next observer, if it listens
// for it (its start was counted by Listed).
func (o metricsObserver) Recovered(cause reflector.StartCause, rv string, stats recovery.Stats) {
	if next, ok := o.next.(recovery.Observer); ok {
		next.Recovered(cause, rv, stats)
	}
}

func (o metricsObserver) WatchStarted(rv string) {
	if o.next != nil {
		o.next.WatchStarted(rv)
	}
}

func (o metricsObserver) WatchEnded(err error) {
	outcome := "normal"
	if err != nil {
		outcome = "error"
	}
	o.m.watchRestarts.WithLabelValues(o.collection, outcome).Inc()
	if o.next != nil {
		o.next.WatchEnded(err)
	}
}

// scrapeCollector reads gauges that are cheaper to compute on scrape than
// to maintain on every change.
type scrapeCollector struct{ m *Metrics }

func (c scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFileBytes, descObjects, descRVLag, descPending, descCacheHits, descCacheMisses, descReadErrors, descCheckpointAcked, descCheckpointTombstones, descCheckpointSkipped, descCheckpointSkippedRelisted, descCheckpointOverflows} {
		ch <- d
	}
}

func (c scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	dbs := make([]*persist.DB, 0, len(c.m.dbs))
	for db := range c.m.dbs {
		dbs = append(dbs, db)
	}
	informers := make([]*Informer, 0, len(c.m.informers))
	for s := range c.m.informers {
		informers = append(informers, s)
	}
	c.m.mu.Unlock()

	for _, db := range dbs {
		if st, err := os.Stat(db.Path()); err == nil {
			ch <- prometheus.MustNewConstMetric(descFileBytes, prometheus.GaugeValue, float64(st.Size()), filepath.Base(db.Path()))
		}
	}
	for _, s := range informers {
		name := s.name
		// Handlers and checkpoints, wherever the objects are.
		pending := map[string]int64{}
		for _, l := range s.processor.Listeners() {
			pending[l.HandlerName()] += l.Pending()
		}
		for handler, n := range pending {
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n), name, handler)
		}
		for _, cp := range s.openCheckpoints() {
			ch <- prometheus.MustNewConstMetric(descCheckpointAcked, prometheus.GaugeValue, float64(cp.Len()), name, cp.Name())
			ch <- prometheus.MustNewConstMetric(descCheckpointTombstones, prometheus.GaugeValue, float64(cp.cp.Tombstones()), name, cp.Name())
			ch <- prometheus.MustNewConstMetric(descCheckpointSkipped, prometheus.CounterValue, float64(cp.Skipped()), name, cp.Name())
			ch <- prometheus.MustNewConstMetric(descCheckpointSkippedRelisted, prometheus.CounterValue, float64(cp.SkippedRelisted()), name, cp.Name())
			ch <- prometheus.MustNewConstMetric(descCheckpointOverflows, prometheus.CounterValue, float64(cp.cp.Overflows()), name, cp.Name())
		}
		if s.persistent == nil || s.persistent.InMemory() {
			continue // In memory, so nothing of it is in a file.
		}
		coll := s.persistent.coll
		if n, err := coll.Len(); err == nil {
			ch <- prometheus.MustNewConstMetric(descObjects, prometheus.GaugeValue, float64(n), name)
		}
		if committed, err := coll.CommittedResourceVersion(); err == nil {
			ch <- prometheus.MustNewConstMetric(descRVLag, prometheus.GaugeValue, rvLag(coll.ResourceVersion(), committed), name)
		}
		stats := coll.CacheStats()
		ch <- prometheus.MustNewConstMetric(descCacheHits, prometheus.CounterValue, float64(stats.Hits), name)
		ch <- prometheus.MustNewConstMetric(descCacheMisses, prometheus.CounterValue, float64(stats.Misses), name)
		ch <- prometheus.MustNewConstMetric(descReadErrors, prometheus.CounterValue, float64(s.persistent.readErrors.Load()), name)
	}
}

// rvLag is applied minus committed when both are integers, as etcd's are.
// Otherwise it is 0 if they are equal and 1 if not.
func rvLag(applied, committed string) float64 {
	a, errA := strconv.ParseInt(applied, 10, 64)
	c, errC := strconv.ParseInt(committed, 10, 64)
	if errA == nil && errC == nil {
		return float64(a - c)
	}
	if applied == committed {
		return 0
	}
	return 1
}

// client-go's InformerMetricsProvider, for the RealFIFO.
var _ cache.InformerMetricsProvider = (*Metrics)(nil)

// NewQueuedItemMetric implements cache.InformerMetricsProvider.
func (m *Metrics) NewQueuedItemMetric(id cache.InformerNameAndResource) cache.GaugeMetric {
	return reservedGauge{id, m.queued.WithLabelValues(id.Name(), id.GroupVersionResource().String())}
}

// NewProcessingLatencyMetric implements cache.InformerMetricsProvider.
func (m *Metrics) NewProcessingLatencyMetric(id cache.InformerNameAndResource) cache.HistogramMetric {
	return reservedHistogram{id, m.processing.WithLabelValues(id.Name(), id.GroupVersionResource().String())}
}

// NewStoreResourceVersionMetric implements cache.InformerMetricsProvider.
func (m *Metrics) NewStoreResourceVersionMetric(id cache.InformerNameAndResource) cache.GaugeMetric {
	return reservedGauge{id, m.storeRV.WithLabelValues(id.Name(), id.GroupVersionResource().String())}
}

// reservedGauge and reservedHistogram update only while their informer name
// is reserved, as client-go asks of providers.
type reservedGauge struct {
	id cache.InformerNameAndResource
	g  prometheus.Gauge
}

func (r reservedGauge) Set(v float64) {
	if r.id.Reserved() {
		r.g.Set(v)
	}
}

type reservedHistogram struct {
	id cache.InformerNameAndResource
	h  prometheus.Observer
}

func (r reservedHistogram) Observe(v float64) {
	if r.id.Reserved() {
		r.h.Observe(v)
	}
}
