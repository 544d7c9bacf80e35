package benchkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/boltinformer/boltinformer/internal/bench/runstats"
)

// ProcSample is one reading of a process's counters, taken from outside it
// so that the process does nothing to be measured. CPUSeconds, Wchar and
// WriteBytes only grow over a process's life; RssAnon goes up and down.
type ProcSample struct {
	// CPUSeconds is utime + stime of every thread, exact to ±0.01 s.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Wchar is the bytes handed to write-like syscalls, cached or not.
	Wchar uint64 `json:"wchar"`
	// WriteBytes is the bytes sent to the block layer: 0 on tmpfs.
	WriteBytes uint64 `json:"writeBytes"`
	// RssAnon is resident private memory (no mapped file pages).
	RssAnon uint64 `json:"rssAnon"`
}

// ReadProc reads pid's counters from /proc/<pid>/{stat,io,status}.
func ReadProc(pid int) (ProcSample, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	var s ProcSample
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
	if s.Wchar, s.WriteBytes, err = ParseProcIO(io); err != nil {
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

// ParseProcIO reads wchar and write_bytes from a /proc/<pid>/io file.
func ParseProcIO(data []byte) (wchar, writeBytes uint64, err error) {
	var haveW, haveWB bool
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		switch {
		case !ok:
			continue
		case k == "wchar":
			wchar, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			haveW = true
		case k == "write_bytes":
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

// CPUMeter measures the CPU seconds a set of processes use from its start.
type CPUMeter struct {
	pids  []int
	start []float64
}

// StartCPUMeter reads the CPU time of pids now.
func StartCPUMeter(pids ...int) *CPUMeter {
	m := &CPUMeter{pids: pids, start: make([]float64, len(pids))}
	for i, pid := range pids {
		var ok bool
		if m.start[i], ok = runstats.CPU(pid); !ok {
			m.start[i] = -1
		}
	}
	return m
}

// Used returns the CPU seconds each process used since the start; -1 for
// one that cannot be read or was restarted (its counter went down).
func (m *CPUMeter) Used() []float64 {
	out := make([]float64, len(m.pids))
	for i, pid := range m.pids {
		now, ok := runstats.CPU(pid)
		if !ok || m.start[i] < 0 || now < m.start[i] {
			out[i] = -1
			continue
		}
		out[i] = now - m.start[i]
	}
	return out
}

// Memory is what this process holds after debug.FreeOSMemory, so that the
// heap is the live heap and RssAnon what the process keeps. PeakRSS (VmHWM)
// keeps the transient; RssFile counts touched pages of mapped files.
type Memory struct {
	RSS, PeakRSS, RssAnon, RssFile, Heap uint64
}

// SelfMemory collects garbage, returns it to the OS, and reads Memory.
func SelfMemory() Memory {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := Memory{Heap: ms.HeapAlloc}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m // not Linux: heap only
	}
	m.RSS, _ = runstats.ParseStatus(status, "VmRSS")
	m.PeakRSS, _ = runstats.ParseStatus(status, "VmHWM")
	m.RssAnon, _ = runstats.ParseStatus(status, "RssAnon")
	m.RssFile, _ = runstats.ParseStatus(status, "RssFile")
	return m
}

// ChildPID is the ID of a child of this process named comm, other than
// not; 0 if there is none.
func ChildPID(comm string, not int) int {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == not {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
		if open < 0 || end < open || string(data[open+1:end]) != comm {
			continue
		}
		if f := strings.Fields(string(data[end+2:])); len(f) > 1 && f[1] == self { // state, ppid
			return pid
		}
	}
	return 0
}

// LoadAverage is the 1-minute load average, or -1.
func LoadAverage() float64 {
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

// Machine describes where the numbers come from.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Server    string `json:"server"`
}

// DescribeMachine reads this machine's description; server is the
// apiserver's version, e.g. from ServerVersion.
func DescribeMachine(server string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Server: server}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.Atoi(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB")); err == nil {
		m.MemoryGiB = (kb + 1<<19) >> 20
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// String is the machine on one line.
func (m Machine) String() string {
	return fmt.Sprintf("%s × %d, %d GiB, Linux %s, %s, %s", m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, m.Server)
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
