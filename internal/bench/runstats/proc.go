package runstats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) would
// need cgo).
const ClockTicks = 100

// CPU returns the CPU seconds (user + system, every thread) process pid has
// used, from /proc/<pid>/stat; ok is false if it cannot be read (not Linux,
// no such process, or pid ≤ 0).
func CPU(pid int) (seconds float64, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return ParseStatCPU(data)
}

// ParseStatCPU reads utime + stime, in seconds, from the contents of a
// /proc/<pid>/stat file; ok is false if they are not there.
func ParseStatCPU(data []byte) (seconds float64, ok bool) {
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses; the fields after its last closing parenthesis start at
	// field 3 (state).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	const utime, stime = 14 - 3, 15 - 3 // fields 14 and 15, counted from field 3
	if len(f) <= stime {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[utime], 10, 64)
	s, err2 := strconv.ParseUint(f[stime], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(u+s) / ClockTicks, true
}

// Status returns field (a size in kB: VmRSS, VmHWM, RssAnon, RssFile, ...)
// of /proc/<pid>/status, in bytes.
func Status(pid int, field string) (uint64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := ParseStatus(data, field)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseStatus reads a "field:   N kB" line of the contents of a
// /proc/<pid>/status file, in bytes.
func ParseStatus(data []byte, field string) (uint64, error) {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", field)
}
