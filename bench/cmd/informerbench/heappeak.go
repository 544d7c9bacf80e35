package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// heapPeaks follows a churn child's live heap through its phases (the
// --heapprofile flag) and keeps, per phase, the highest live heap seen and
// a heap profile taken at it: what was live when the process held the
// most. The live heap is the runtime's count of what the last collection
// marked (/gc/heap/live:bytes), polled every heapPollEvery; a new profile
// is written whenever the phase's peak grows by heapProfileStep, so the
// file left is one taken within a step of the peak.
//
// One goroutine polls; begin switches the phase, snapshot writes a profile
// on demand, stop ends the goroutine and waits for it. A nil *heapPeaks
// does nothing.
type heapPeaks struct {
	dir, informer string

	mu      sync.Mutex
	phase   string            // guarded by mu
	peaks   map[string]uint64 // phase -> highest live heap; guarded by mu
	written map[string]uint64 // phase -> live heap of the profile written
	err     error             // the first failed write; guarded by mu

	stopc, donec chan struct{}
}

const (
	heapPollEvery   = 100 * time.Millisecond
	heapProfileStep = 1.05
)

// startHeapPeaks starts following the live heap in phase, writing
// profiles to dir/heap-<phase>-<informer>.pprof; with dir empty it returns
// nil.
func startHeapPeaks(dir, informer, phase string) *heapPeaks {
	if dir == "" {
		return nil
	}
	h := &heapPeaks{dir: dir, informer: informer, phase: phase, peaks: map[string]uint64{}, written: map[string]uint64{},
		stopc: make(chan struct{}), donec: make(chan struct{})}
	go func() {
		defer close(h.donec)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(heapPollEvery)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				h.observe(sample[0].Value.Uint64())
			}
			select {
			case <-h.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// begin makes phase the current one.
func (h *heapPeaks) begin(phase string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.phase = phase
	h.mu.Unlock()
}

// observe records live in the current phase and writes a profile if it
// is a new peak by heapProfileStep.
func (h *heapPeaks) observe(live uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if live <= h.peaks[h.phase] {
		return
	}
	h.peaks[h.phase] = live
	if float64(live) < float64(h.written[h.phase])*heapProfileStep {
		return
	}
	h.written[h.phase] = live
	if err := writeHeapProfile(filepath.Join(h.dir, "heap-"+h.phase+"-"+h.informer+".pprof")); err != nil && h.err == nil {
		h.err = err
	}
}

// snapshot writes a heap profile after a collection, so that its
// allocation counts are current, to dir/heap-<name>-<informer>.pprof:
// the churn's own allocations are the difference of the profiles taken
// at its start and its end (go tool pprof -diff_base). Errors are kept
// for stop.
func (h *heapPeaks) snapshot(name string) {
	if h == nil {
		return
	}
	runtime.GC()
	err := writeHeapProfile(filepath.Join(h.dir, "heap-"+name+"-"+h.informer+".pprof"))
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && h.err == nil {
		h.err = err
	}
}

// stop ends the polling and returns the peak live heap of each phase, or
// the first profile that could not be written.
func (h *heapPeaks) stop() (map[string]uint64, error) {
	if h == nil {
		return nil, nil
	}
	select {
	case <-h.stopc:
	default:
		close(h.stopc)
	}
	<-h.donec
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peaks, h.err
}

// writeHeapProfile writes the heap profile (as of the last collection) to
// path, replacing it.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	w := &errWriter{w: f}
	err = pprof.Lookup("heap").WriteTo(w, 0)
	if err == nil {
		err = w.err
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return nil
}
