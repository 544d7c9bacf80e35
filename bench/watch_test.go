package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
	"github.com/boltinformer/boltinformer/internal/wire"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/reflector"
)

// The watch benchmark feeds the same stream of Pod updates to client-go's
// informer and to boltinformer's, without a server: the stream is the bytes
// an apiserver sends for a protobuf watch, decoded by client-go's own watch
// decoder for both. A drain starts an informer over BENCH_OBJECTS Pods
// (default 10,000; listed from protobuf PodLists as the apiserver answers
// each: whole for client-go's list at resourceVersion 0, in pages of 500
// for boltinformer's consistent list; for boltinformer committed to a
// fresh file, fsync on), holds the watch stream until then,
// and times BENCH_WATCH_UPDATES updates (default 20,000; round robin over
// the Pods, each with a new resourceVersion and annotation) from the
// stream's release. Each iteration drains both informers, in alternating
// order, so that both see the same load on a shared machine; run with
// -count for repetitions. Per informer (prefix client-go- or
// boltinformer-):
//
//   - cpu-ns/update: the process's CPU time (user + system, every core) over
//     the drain, per update: decoding, the store, handlers, the commits and
//     the garbage collector.
//   - delivered/s: updates per second until the handler saw the last one.
//   - drained/s: updates per second until the last one is durable: for
//     boltinformer committed to the file (its resourceVersion on disk), for
//     client-go, whose store is memory, the same as delivered/s.
//   - payload-stored/update (boltinformer): the share of updates stored from
//     the protobuf payload they were decoded from, without a marshal.
//   - B/update: bytes allocated on the heap over the drain, per update, and
//     live-MiB, the heap in use when the drain starts: together they set the
//     garbage collector's share.
//   - start-B/object: bytes allocated on the heap by the cold start, from Run
//     until synced (for boltinformer also committed), per listed object.
//
// BENCH_PAGE_SIZE and BENCH_BATCH_INTERVAL (a duration) set the file's
// persist.Options.PageSize and BatchInterval (default: the package's).
// BENCH_WATCH_RATE paces the stream at that many updates per second from
// its release (default 0: all at once, a burst). A burst makes each group
// commit hold BatchLimit changes; a steady controller's commits hold the
// changes of one BatchInterval, which pacing reproduces.
// BENCH_WATCH_WIRE=0 decodes boltinformer's watch as client-go's, so that
// every update is marshalled for its record (as before the factories kept
// the server's bytes).
//
// x-cpu, x-drained, x-alloc (B/update) and x-start-alloc (start-B/object)
// are boltinformer's figure over client-go's in the same iterations
// (targets: x-cpu <= 1.1, x-drained >= 0.7, x-alloc and x-start-alloc <= 1.3). ns/op is one
// iteration: both informers' starts and drains. BENCH_WATCH_CPUPROFILE=prefix writes a CPU profile of each
// informer's first drain alone to prefix-<informer>.pprof, and allocation
// profiles before and after it (compare them with pprof -base).
func BenchmarkWatch(b *testing.B) {
	updates := envCount("BENCH_WATCH_UPDATES", 20000)
	objs := pods(objects)
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	for _, p := range objs {
		list.Items = append(list.Items, *p)
	}
	// The apiserver lists in its storage's key order: by namespace, then name.
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	listWire, err := list.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	pages, err := listPages(list, reflector.DefaultPagedListPageSize)
	if err != nil {
		b.Fatal(err)
	}
	list = nil
	stream, err := watchStream(objs, updates)
	if err != nil {
		b.Fatal(err)
	}
	lastRV := strconv.Itoa(watchFirstRV + updates - 1)
	rate := envCount("BENCH_WATCH_RATE", 0)
	batchInterval, _ := time.ParseDuration(os.Getenv("BENCH_BATCH_INTERVAL"))

	type informer struct {
		name string
		// wire: the informer's watch is decoded as boltinformer's
		// factories decode it (see streamLW).
		wire  bool
		start func(lw cache.ListerWatcher) (cache.SharedIndexInformer, *commitWatch, func())
		// sums over the drains
		cpu, delivered, drained time.Duration
		allocated, live         uint64
		startAllocated          uint64
		payloads                int64 // updates stored from their wire payload
	}
	informers := []*informer{
		{name: "client-go", start: func(lw cache.ListerWatcher) (cache.SharedIndexInformer, *commitWatch, func()) {
			return cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, indexers), nil, func() {}
		}},
		{name: "boltinformer", wire: os.Getenv("BENCH_WATCH_WIRE") != "0", start: func(lw cache.ListerWatcher) (cache.SharedIndexInformer, *commitWatch, func()) {
			dir, err := os.MkdirTemp(b.TempDir(), "watch")
			if err != nil {
				b.Fatal(err)
			}
			db, err := persist.Open(filepath.Join(dir, "cache.db"), persist.Options{Scheme: scheme.Scheme, PageSize: benchPageSize, BatchInterval: batchInterval})
			if err != nil {
				b.Fatal(err)
			}
			inf, err := bcache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, indexers, bcache.Persistence{DB: db, Collection: "pods"})
			if err != nil {
				b.Fatal(err)
			}
			committed := newCommitWatch(inf.Indexer().Collection())
			return inf, committed, func() {
				committed.remove()
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				_ = os.RemoveAll(dir)
			}
		}},
	}

	drain := func(inf *informer) {
		lw := newStreamLW(listWire, stream)
		lw.pages = pages
		lw.wire = inf.wire
		lw.rate = rate
		si, committed, stop := inf.start(lw)
		h := &countingHandler{want: int64(updates), done: make(chan struct{})}
		if _, err := si.AddEventHandler(h); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var start0, start1 runtime.MemStats
		runtime.ReadMemStats(&start0)
		wg.Go(func() { si.RunWithContext(ctx) })
		if !cache.WaitForCacheSync(ctx.Done(), si.HasSynced) {
			b.Fatal("not synced")
		}
		if committed != nil {
			committed.wait(b, "100")
		}
		runtime.ReadMemStats(&start1)
		inf.startAllocated += start1.TotalAlloc - start0.TotalAlloc
		runtime.GC()

		stopProfile := profileDrain(b, inf.name)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		payloads0, _ := wire.Stats()
		cpu0, t0 := runstats.SelfCPU(), time.Now()
		close(lw.release)
		select {
		case <-h.done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%s: %d of %d updates after 5m", inf.name, h.seen.Load(), updates)
		}
		t1 := time.Now()
		if committed != nil {
			committed.wait(b, lastRV)
		}
		t2, cpu1 := time.Now(), runstats.SelfCPU()
		runtime.ReadMemStats(&ms1)
		stopProfile()

		payloads1, _ := wire.Stats()
		inf.payloads += payloads1 - payloads0
		inf.cpu += cpu1 - cpu0
		inf.delivered += t1.Sub(t0)
		inf.drained += t2.Sub(t0)
		inf.allocated += ms1.TotalAlloc - ms0.TotalAlloc
		inf.live += ms0.HeapAlloc
		cancel()
		wg.Wait()
		stop()
	}

	iteration := 0
	for b.Loop() {
		for j := range informers {
			drain(informers[j^iteration&1])
		}
		iteration++
	}
	n := float64(iteration) * float64(updates)
	for _, inf := range informers {
		b.ReportMetric(float64(inf.cpu.Nanoseconds())/n, inf.name+"-cpu-ns/update")
		b.ReportMetric(n/inf.delivered.Seconds(), inf.name+"-delivered/s")
		b.ReportMetric(n/inf.drained.Seconds(), inf.name+"-drained/s")
		b.ReportMetric(float64(inf.allocated)/n, inf.name+"-B/update")
		b.ReportMetric(float64(inf.live)/float64(iteration)/(1<<20), inf.name+"-live-MiB")
		b.ReportMetric(float64(inf.startAllocated)/float64(iteration)/float64(objects), inf.name+"-start-B/object")
	}
	cg, bolt := informers[0], informers[1]
	b.ReportMetric(float64(bolt.payloads)/n, "boltinformer-payload-stored/update")
	b.ReportMetric(float64(bolt.cpu)/float64(cg.cpu), "x-cpu")
	b.ReportMetric(float64(cg.drained)/float64(bolt.drained), "x-drained")
	b.ReportMetric(float64(bolt.allocated)/float64(cg.allocated), "x-alloc")
	b.ReportMetric(float64(bolt.startAllocated)/float64(cg.startAllocated), "x-start-alloc")
}

// profileDrain starts the CPU profile BENCH_WATCH_CPUPROFILE asks for, if
// any and if this is the informer's first drain, and returns its stop.
func profileDrain(b *testing.B, informer string) func() {
	prefix := os.Getenv("BENCH_WATCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s-%s.pprof", prefix, informer)
	if _, err := os.Stat(name); err == nil {
		return func() {} // an earlier drain of this variant wrote it
	}
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	writeHeap := func(suffix string) {
		runtime.GC() // the profile shows allocations up to the last GC
		h, err := os.Create(strings.TrimSuffix(name, ".pprof") + suffix)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		if err := pprof.Lookup("allocs").WriteTo(h, 0); err != nil {
			b.Fatal(err)
		}
	}
	writeHeap("-allocs-before.pprof")
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		writeHeap("-allocs-after.pprof")
	}
}

// watchFirstRV is the resourceVersion of the stream's first update; the
// list is at 100.
const watchFirstRV = 1000

// watchStream returns the bytes of a protobuf watch response carrying
// updates MODIFIED events, round robin over objs, as kube-apiserver frames
// them: each event a length-prefixed metav1.WatchEvent whose object is the
// Pod in protobuf with its envelope. objs are left unchanged.
func watchStream(objs []*corev1.Pod, updates int) ([]byte, error) {
	info, ok := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	if !ok {
		return nil, fmt.Errorf("no protobuf serializer")
	}
	embedded := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	var out bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&out), info.StreamSerializer.Serializer)
	for n := range updates {
		p := objs[n%len(objs)].DeepCopy()
		p.ResourceVersion = strconv.Itoa(watchFirstRV + n)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations["bench/tick"] = strconv.Itoa(n)
		raw, err := kruntime.Encode(embedded, p)
		if err != nil {
			return nil, err
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: kruntime.RawExtension{Raw: raw}}); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// listPages returns list's items as protobuf PodLists of limit items each,
// the continue token of page n being n, as a consistent list in pages
// answers.
func listPages(list *corev1.PodList, limit int) ([][]byte, error) {
	var pages [][]byte
	for start := 0; start < len(list.Items); start += limit {
		page := &corev1.PodList{ListMeta: list.ListMeta, Items: list.Items[start:min(start+limit, len(list.Items))]}
		if start+limit < len(list.Items) {
			page.Continue = strconv.Itoa(len(pages) + 1)
		}
		wire, err := page.Marshal()
		if err != nil {
			return nil, err
		}
		pages = append(pages, wire)
	}
	return pages, nil
}

// streamLW lists a protobuf PodList and watches a recorded stream, decoded
// as client-go's REST client decodes a protobuf watch. The stream is held
// until release is closed; after its last event the watch stays open.
//
// A list at resourceVersion "0" (client-go's) is answered whole, as the
// apiserver's watch cache answers it whatever its limit; a consistent list
// with a limit (boltinformer's cold start) is answered in pages.
type streamLW struct {
	list []byte
	// pages are the list in pages of reflector.DefaultPagedListPageSize
	// (listPages).
	pages   [][]byte
	stream  []byte
	release chan struct{}
	watches atomic.Int32
	// wire decodes watch events as boltinformer's factories do: keeping
	// each object's protobuf payload for the store (internal/wire).
	wire bool
	// rate, if not 0, paces the stream at rate events per second.
	rate int
}

func newStreamLW(list, stream []byte) *streamLW {
	return &streamLW{list: list, stream: stream, release: make(chan struct{})}
}

func (lw *streamLW) List(opts metav1.ListOptions) (kruntime.Object, error) {
	out := &corev1.PodList{}
	if opts.Limit == 0 || opts.ResourceVersion == "0" || lw.pages == nil {
		return out, out.Unmarshal(lw.list)
	}
	if opts.Limit != int64(reflector.DefaultPagedListPageSize) {
		return nil, fmt.Errorf("a list in pages of %d; the benchmark has pages of %d", opts.Limit, reflector.DefaultPagedListPageSize)
	}
	n := 0
	if opts.Continue != "" {
		var err error
		if n, err = strconv.Atoi(opts.Continue); err != nil || n < 0 || n >= len(lw.pages) {
			return nil, fmt.Errorf("continue token %q", opts.Continue)
		}
	}
	return out, out.Unmarshal(lw.pages[n])
}

func (lw *streamLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	var data []byte
	if lw.watches.Add(1) == 1 {
		data = lw.stream
	}
	info, _ := kruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	body := &heldReader{release: lw.release, r: bytes.NewReader(data), closed: make(chan struct{})}
	if lw.rate > 0 {
		body.rate, body.frameEnds = lw.rate, frameEnds(data)
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(body)
	var codecs kruntime.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if lw.wire {
		codecs = wire.NegotiatedSerializer{NegotiatedSerializer: codecs, Creater: scheme.Scheme}
	}
	objects := codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
	dec := restwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), objects)
	return watch.NewStreamWatcher(dec, apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
}

// IsWatchListSemanticsUnSupported makes client-go LIST, as boltinformer's
// cold start does.
func (lw *streamLW) IsWatchListSemanticsUnSupported() bool { return true }

// heldReader serves r once release is closed, then blocks until Close, as
// an idle watch connection does. With a rate, it serves frame n of r no
// earlier than n/rate seconds after the release.
type heldReader struct {
	release <-chan struct{}
	r       *bytes.Reader
	closed  chan struct{}
	once    sync.Once

	rate      int
	frameEnds []int     // the end offset of each frame of r
	released  time.Time // when the first Read found release closed
}

func (h *heldReader) Read(p []byte) (int, error) {
	select {
	case <-h.release:
	case <-h.closed:
		return 0, io.EOF
	}
	if h.rate > 0 && h.r.Len() > 0 {
		if h.released.IsZero() {
			h.released = time.Now()
		}
		read := int(h.r.Size()) - h.r.Len()
		next := sort.SearchInts(h.frameEnds, read+1) // the frame being read
		due := h.released.Add(time.Duration(next) * time.Second / time.Duration(h.rate))
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-h.closed:
				return 0, io.EOF
			}
		}
		p = p[:min(len(p), h.frameEnds[next]-read)]
	}
	if h.r.Len() > 0 {
		return h.r.Read(p)
	}
	<-h.closed
	return 0, io.EOF
}

func (h *heldReader) Close() error {
	h.once.Do(func() { close(h.closed) })
	return nil
}

// frameEnds returns the end offset of each frame of a length-delimited
// stream (a 4-byte big-endian length, then that many bytes).
func frameEnds(stream []byte) []int {
	var ends []int
	for off := 0; off+4 <= len(stream); {
		off += 4 + int(binary.BigEndian.Uint32(stream[off:]))
		ends = append(ends, off)
	}
	return ends
}

// countingHandler closes done when it has seen want updates.
type countingHandler struct {
	want int64
	seen atomic.Int64
	done chan struct{}
}

func (h *countingHandler) OnAdd(interface{}, bool) {}
func (h *countingHandler) OnDelete(interface{})    {}
func (h *countingHandler) OnUpdate(_, _ interface{}) {
	if h.seen.Add(1) == h.want {
		close(h.done)
	}
}

// commitWatch tells when a collection's committed resourceVersion reaches
// a given one, woken by the DB's commit observer.
type commitWatch struct {
	coll    *persist.Collection
	commits chan struct{}
	remove  func()
}

func newCommitWatch(coll *persist.Collection) *commitWatch {
	w := &commitWatch{coll: coll, commits: make(chan struct{}, 1)}
	w.remove = coll.DB().AddCommitObserver(func(persist.CommitStats) {
		select {
		case w.commits <- struct{}{}:
		default:
		}
	})
	return w
}

// wait returns once resourceVersion rv or a later one is on disk.
func (w *commitWatch) wait(b *testing.B, rv string) {
	want, _ := strconv.Atoi(rv)
	timeout := time.After(time.Minute)
	for {
		got, err := w.coll.CommittedResourceVersion()
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := strconv.Atoi(got); n >= want {
			return
		}
		select {
		case <-w.commits:
		case <-timeout:
			b.Fatalf("resourceVersion %s not committed after 1m (on disk: %s)", rv, got)
		}
	}
}
