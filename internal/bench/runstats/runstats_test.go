package runstats

import (
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseProcFiles(t *testing.T) {
	status := []byte("Name:\tinformerbench\nVmRSS:\t  500 kB\nRssAnon:\t  300 kB\nRssFile:\t  200 kB\n")
	if b, err := ParseStatus(status, "RssAnon"); err != nil || b != 300<<10 {
		t.Errorf("RssAnon = %d, %v; want %d", b, err, 300<<10)
	}
	if _, err := ParseStatus(status, "RssShmem"); err == nil {
		t.Error("found a missing field")
	}
	if _, err := ParseStatus([]byte("VmHWM:\tlots kB\n"), "VmHWM"); err == nil {
		t.Error("accepted a field that is not a number")
	}
	// The command name may hold spaces and parentheses; utime and stime
	// are fields 14 and 15.
	stat := []byte("4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 8 0 123 4567 89 18446744073709551615\n")
	if s, ok := ParseStatCPU(stat); !ok || s != 3.8 {
		t.Errorf("ParseStatCPU = %v, %v; want 3.8", s, ok)
	}
	// A line cut short, or without the command's parentheses, has no
	// utime and stime to read.
	for _, bad := range []string{"4242 (cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250\n", "4242 cmd S 1 2 3 4 5 6 7 8 9 10 11 12 13 14\n", ""} {
		if s, ok := ParseStatCPU([]byte(bad)); ok {
			t.Errorf("ParseStatCPU(%q) = %v, want not ok", bad, s)
		}
	}
}

func TestCPUAndStatusOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	pid := os.Getpid()
	start, ok := CPU(pid)
	if !ok {
		t.Fatal("CPU of this process cannot be read")
	}
	self0 := SelfCPU()
	// Spin until the kernel has charged at least two ticks to us.
	want := 2.0 / ClockTicks
	deadline := time.Now().Add(30 * time.Second)
	var used float64
	for (used < want || SelfCPU()-self0 < 20*time.Millisecond) && time.Now().Before(deadline) {
		x := 0
		for i := range 10_000_000 {
			x += i
		}
		_ = x
		now, _ := CPU(pid)
		used = now - start
	}
	if used < want {
		t.Errorf("own CPU seconds after spinning = %v, want at least %v", used, want)
	}
	if self := SelfCPU() - self0; self < 20*time.Millisecond {
		t.Errorf("SelfCPU grew by %v after spinning, want at least 20ms", self)
	}
	for _, pid := range []int{0, -5} {
		if _, ok := CPU(pid); ok {
			t.Errorf("CPU(%d) succeeded", pid)
		}
	}
	if anon, err := Status(pid, "RssAnon"); err != nil || anon == 0 {
		t.Errorf("RssAnon of this process = %d, %v; want > 0", anon, err)
	}
	if _, err := Status(pid, "NoSuchField"); err == nil {
		t.Error("Status found a field /proc does not have")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		orig := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		for i := range orig {
			if c.xs[i] != orig[i] {
				t.Errorf("Median reordered its argument: %v, was %v", c.xs, orig)
				break
			}
		}
	}
}
