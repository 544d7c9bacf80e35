package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/boltinformer/boltinformer/persist"
)

// Bounds on the throughput phase.
const (
	throughputTimeout = 10 * time.Minute
	backlogQuiet      = 500 * time.Millisecond // no bytes for this long: backlog complete
	backlogTimeout    = time.Minute
)

// measureThroughput holds the watch streams, tells the parent to make the
// updates (READY), waits for its GO and for the streams to go quiet, then
// releases the backlog and times the handler until it has seen h.want
// tagged updates. For boltinformer (coll != nil) it also samples how far
// the committed resourceVersion trails the applied one, and times the last
// update's commit.
func measureThroughput(h *handler, gate *watchGate, in *bufio.Reader, coll *persist.Collection, stdout io.Writer, profilePrefix string) (*throughputResult, error) {
	gate.hold()
	fmt.Fprintln(stdout, readyLine)
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != goLine {
		gate.release()
		return nil, fmt.Errorf("throughput: waiting for %s: got %q, %v", goLine, line, err)
	}
	var backlog int64
	for deadline := time.Now().Add(backlogTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var quiet time.Duration
		if backlog, quiet = gate.quietFor(); backlog > 0 && quiet >= backlogQuiet {
			break
		}
	}

	var lags []float64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if coll == nil {
			return
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
			if committed, err := coll.CommittedResourceVersion(); err == nil {
				lags = append(lags, float64(max(0, rvNumber(coll.ResourceVersion())-rvNumber(committed))))
			}
		}
	}()

	before := h.tagged.Load() // a read in flight when the gate closed lets a few through
	stopProfile := profilePhase(profilePrefix, "throughput")
	defer stopProfile()
	cpu0 := cpuTime()
	released := time.Now()
	gate.release()
	var err error
	select {
	case <-h.done:
	case <-time.After(throughputTimeout):
		err = fmt.Errorf("throughput: %d of %d updates after %v", h.tagged.Load(), h.want, throughputTimeout)
	}
	cpu := cpuTime() - cpu0
	stopProfile()
	close(stopSampling)
	<-sampled
	if err != nil {
		return nil, err
	}

	events := h.want - before
	last := time.Unix(0, h.last.Load())
	res := &throughputResult{
		Events:       int(events),
		BacklogBytes: backlog,
		EventsPerSec: float64(events) / last.Sub(released).Seconds(),
		CPUPerEvent:  cpu.Seconds() * 1e6 / float64(events),
	}
	if coll != nil {
		for {
			committed, err := coll.CommittedResourceVersion()
			if err != nil {
				return nil, err
			}
			if uint64(rvNumber(committed)) >= h.lastRV.Load() {
				break
			}
			time.Sleep(time.Millisecond)
		}
		res.DurableMs = float64(time.Since(last).Microseconds()) / 1e3
		res.DurablePerSec = float64(events) / time.Since(released).Seconds()
		res.LagP50, res.LagMax = percentile(lags, 0.5), percentile(lags, 1)
	}
	return res, nil
}

// rvNumber reads an etcd-backed resourceVersion; 0 if it is not a number.
func rvNumber(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile of xs (p in [0,1], nearest rank); 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
