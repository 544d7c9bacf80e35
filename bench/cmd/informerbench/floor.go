package main

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/internal/runstats"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// The decode floor: what decoding the objects alone costs, with no
// informer, no apiserver and no handler, on every core. An informer start
// that hands each object to its handlers decoded cannot be faster than
// this on the same machine; the report divides the time to every initial
// add delivered by it.

// floorRuns is how many timed decodes of each kind a floor child makes
// (after one untimed round); it reports their medians.
const floorRuns = 3

// floorResult is a floor child's measurement.
type floorResult struct {
	Objects int `json:"objects"`
	Workers int `json:"workers"` // GOMAXPROCS: goroutines decoding
	// CodecSeconds: every record of the cache file decoded with
	// persist.Codec (boltinformer's record codec; here protobuf payloads
	// behind a small header), the median of floorRuns.
	CodecSeconds float64   `json:"codecSeconds"`
	CodecRuns    []float64 `json:"codecRuns"`
	// CodecFreshSeconds: the same decode, timed once as the process's first
	// work, as a restarted controller decodes: its heap is not grown yet
	// (page faults, zeroing, a garbage collector pacing a growing heap).
	// This is the floor a warm start is compared with.
	CodecFreshSeconds float64 `json:"codecFreshSeconds"`
	// ProtobufSeconds: the same Pods' bare protobuf (the records'
	// payloads) with the generated Pod.Unmarshal: client-go's share of
	// decoding a protobuf list, without envelopes.
	ProtobufSeconds float64   `json:"protobufSeconds"`
	ProtobufRuns    []float64 `json:"protobufRuns"`
}

// measureFloor reads the records of spec.File's collection from the
// memory-mapped file, as a warm start does (the page cache is warm: the
// informer children just used the file), and times floorRuns parallel
// decodes of them with each decoder, alternating, after one untimed round
// of each (so both see a grown heap and faulted-in pages: the floor is a
// lower bound).
func measureFloor(spec childSpec) (*childResult, error) {
	f, err := inspectfile.Open(spec.File, inspectfile.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("decode floor: %w", err)
	}
	defer f.Close()
	fl := &floorResult{Workers: runtime.GOMAXPROCS(0)}
	err = f.View(boltCollection(spec.Selector), func(c *inspectfile.Collection) error {
		// The slices alias the read transaction's memory map; both decoders
		// copy what they keep.
		var records, payloads [][]byte
		err := c.ForEachRecord(func(key string, rec []byte) error {
			h, payload, err := format.ReadHeader(rec)
			if err != nil {
				return fmt.Errorf("record %s: %w", key, err)
			}
			if h.Encoding != format.EncodingProtobuf {
				return fmt.Errorf("record %s is not stored as protobuf (encoding %d): no protobuf floor for it", key, h.Encoding)
			}
			records, payloads = append(records, rec), append(payloads, payload)
			return nil
		})
		if err != nil {
			return err
		}
		if len(records) != spec.Expect {
			return fmt.Errorf("the file holds %d records, want %d", len(records), spec.Expect)
		}
		fl.Objects = len(records)
		codec := persist.NewCodec(scheme.Scheme)
		decoders := []struct {
			inputs [][]byte
			decode func([]byte) (kruntime.Object, error)
			runs   *[]float64
		}{
			{records, codec.Decode, &fl.CodecRuns},
			{payloads, unmarshalPod, &fl.ProtobufRuns},
		}
		for round := range floorRuns + 1 {
			for _, d := range decoders {
				took, err := decodeParallel(d.inputs, d.decode)
				if err != nil {
					return err
				}
				if round > 0 {
					*d.runs = append(*d.runs, took.Seconds())
				} else if d.runs == &fl.CodecRuns {
					fl.CodecFreshSeconds = took.Seconds()
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode floor of %s: %w", spec.File, err)
	}
	fl.CodecSeconds, fl.ProtobufSeconds = runstats.Median(fl.CodecRuns), runstats.Median(fl.ProtobufRuns)
	return &childResult{Variant: spec.Variant, Floor: fl}, nil
}

func unmarshalPod(b []byte) (kruntime.Object, error) {
	p := &corev1.Pod{}
	return p, p.Unmarshal(b)
}

// floorBatch is how many inputs a decoding goroutine takes at a time: large
// enough that the shared counter is no contention, small enough that the
// goroutines finish together.
const floorBatch = 64

// decodeParallel decodes every input on GOMAXPROCS goroutines and returns
// the wall time from the first decode to the last. It keeps every decoded
// object until all are done, as a store keeps them, so the garbage
// collector marks a growing heap as it would in an informer. A collection
// runs before the clock starts, so no earlier round's garbage is charged.
func decodeParallel(inputs [][]byte, decode func([]byte) (kruntime.Object, error)) (time.Duration, error) {
	runtime.GC()
	out := make([]kruntime.Object, len(inputs))
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(floorBatch)) - floorBatch
				if i >= len(inputs) {
					return
				}
				for j := i; j < min(i+floorBatch, len(inputs)); j++ {
					obj, err := decode(inputs[j])
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("decoding object %d: %w", j, err)
						}
						mu.Unlock()
						next.Store(int64(len(inputs))) // stop the others
						return
					}
					out[j] = obj
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr == nil && slices.Contains(out, nil) {
		firstErr = fmt.Errorf("decode floor: an object was not decoded")
	}
	runtime.KeepAlive(out)
	return took, firstErr
}
