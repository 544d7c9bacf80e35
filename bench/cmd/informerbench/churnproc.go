package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boltinformer/boltinformer/internal/runstats"
)

// What the churn bench reads of a child process from /proc, from the
// parent: the child does nothing to be measured, so its own reading of
// itself cannot distort the figures.

// procSample is one reading of a process's counters. CPUSeconds, Wchar and
// WriteBytes only grow over a process's life; RssAnon goes up and down.
type procSample struct {
	// CPUSeconds: utime + stime of every thread (/proc/<pid>/stat), in
	// 10 ms ticks, so a difference is exact to ±0.01 s.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Wchar: bytes handed to write-like syscalls (write, pwrite, sendmsg
	// on sockets too): what the process asked to write, cached or not.
	Wchar uint64 `json:"wchar"`
	// WriteBytes: bytes of page cache this process dirtied that are sent to
	// the block layer (written back, or fsynced): what reaches the disk.
	// A page dirtied twice before writeback counts once; on tmpfs nothing
	// is ever sent, so it stays 0.
	WriteBytes uint64 `json:"writeBytes"`
	// RssAnon: resident private memory (no mapped file pages).
	RssAnon uint64 `json:"rssAnon"`
}

// readProcSample reads pid's counters from /proc/<pid>/{stat,io,status}.
func readProcSample(pid int) (procSample, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	var s procSample
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return s, err
	}
	var ok bool
	if s.CPUSeconds, ok = runstats.ParseStatCPU(stat); !ok {
		return s, fmt.Errorf("%sstat: no utime/stime in %q", dir, stat)
	}
	io, err := os.ReadFile(dir + "io")
	if err != nil {
		return s, err
	}
	if s.Wchar, s.WriteBytes, err = parseProcIO(io); err != nil {
		return s, fmt.Errorf("%sio: %w", dir, err)
	}
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return s, err
	}
	if s.RssAnon, err = runstats.ParseStatus(status, "RssAnon"); err != nil {
		return s, fmt.Errorf("%sstatus: %w", dir, err)
	}
	return s, nil
}

// parseProcIO reads wchar and write_bytes from the contents of a
// /proc/<pid>/io file ("key: value" lines).
func parseProcIO(data []byte) (wchar, writeBytes uint64, err error) {
	var haveW, haveWB bool
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		switch k {
		case "wchar":
			wchar, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			haveW = true
		case "write_bytes":
			writeBytes, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			haveWB = true
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
	}
	if !haveW || !haveWB {
		return 0, 0, fmt.Errorf("no wchar or write_bytes line (a kernel without task I/O accounting?)")
	}
	return wchar, writeBytes, nil
}

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

// sample reads one round and returns it.
func (s *churnSampler) sample() []churnSample {
	t := time.Since(s.start).Seconds()
	round := make([]churnSample, 0, len(s.procs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		x, err := readProcSample(p.pid())
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("sampling the %s child: %w", p.informer, err)
			}
			continue
		}
		round = append(round, churnSample{T: t, Informer: p.informer, Phase: s.phase, procSample: x})
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
