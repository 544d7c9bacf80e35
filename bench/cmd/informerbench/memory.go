package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// memory is what the process holds, read after debug.FreeOSMemory (a GC,
// then freed heap returned to the OS) so that the heap is the live heap and
// private memory is what the informer keeps: every child times a first
// List after sync, and a bounded informer's List decodes every object
// from the file, garbage the runtime would return over the next minutes.
// The peak (VmHWM) keeps the transient. RSS counts the pages of boltinformer's memory-mapped file that the
// process touched (rssFile: clean page cache, reclaimable); rssAnon is the
// private memory.
type memory struct {
	rss, peakRSS, rssAnon, rssFile, heap uint64
}

func readMemory() memory {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{heap: ms.HeapAlloc}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return m // not Linux: heap only
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			m.rss = kb << 10
		case "VmHWM":
			m.peakRSS = kb << 10
		case "RssAnon":
			m.rssAnon = kb << 10
		case "RssFile":
			m.rssFile = kb << 10
		}
	}
	return m
}
