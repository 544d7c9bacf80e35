package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// The churn bench reads each child from /proc, and a boltinformer child's
// file size from its directory, from the parent, so that the child does
// nothing to be measured.

// churnSampler reads every child's counters at start, then every interval
// until stop, and once more on demand (the last sample), tagging each
// sample with the run's phase. One goroutine samples; stop ends it and
// waits for it.
type churnSampler struct {
	procs []*churnProc
	phase string
	start time.Time
	// onSample, if set, sees each round of samples (one per child), on the
	// sampling goroutine.
	onSample func([]churnSample)

	mu      sync.Mutex
	samples []churnSample // guarded by mu
	err     error         // the first failed read, guarded by mu

	stopc, donec chan struct{}
}

// startSampler takes the first round of samples (t = 0) before it returns.
func startSampler(procs []*churnProc, phase string, every time.Duration, onSample func([]churnSample)) *churnSampler {
	s := &churnSampler{procs: procs, phase: phase, start: time.Now(), onSample: onSample, stopc: make(chan struct{}), donec: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.donec)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				if round := s.sample(); s.onSample != nil {
					s.onSample(round)
				}
			}
		}
	}()
	return s
}

func (s *churnSampler) sample() []churnSample {
	t := time.Since(s.start).Seconds()
	round := make([]churnSample, 0, len(s.procs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		x, err := benchkit.ReadProc(p.Pid())
		var file int64
		if err == nil && p.file != "" {
			file, err = fileSize(p.file)
		}
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("sampling the %s child: %w", p.informer, err)
			}
			continue
		}
		round = append(round, churnSample{T: t, Informer: p.informer, Phase: s.phase, FileBytes: file, ProcSample: x})
	}
	s.samples = append(s.samples, round...)
	return round
}

// elapsed is the time since the first round, in seconds.
func (s *churnSampler) elapsed() float64 { return time.Since(s.start).Seconds() }

// stop ends the periodic sampling, takes the last round, and returns every
// sample in time order, or the first read that failed.
func (s *churnSampler) stop() ([]churnSample, error) {
	close(s.stopc)
	<-s.donec
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.err
}
