package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// loadAverage returns the 1-minute load average (/proc/loadavg), or -1.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return x
}

// idleCPU measures the CPU seconds per second kube-apiserver and etcd use
// with no informer running, over d: the background the per-start costs
// include for their duration. -1 where a process cannot be read.
func idleCPU(ctx context.Context, cl *cluster, d time.Duration) (apiserver, etcd float64) {
	as, et := cl.pids()
	m := startCPUMeter(as, et)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return -1, -1
	}
	used := m.used()
	rate := func(x float64) float64 {
		if x < 0 {
			return -1
		}
		return x / d.Seconds()
	}
	return rate(used[0]), rate(used[1])
}
