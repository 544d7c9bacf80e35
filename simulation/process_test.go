package simulation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Each schedule runs in a process of its own, this test binary started
// again with -simulation.child: a panic on one of the informer's
// goroutines (damage the library does not expect, say) then fails that
// schedule, with its trace and the panic, instead of ending the whole run
// without saying which schedule did it. goleak checks each child on its
// own. -simulation.inprocess runs schedules in the test's process instead.

var (
	flagChild     = flag.String("simulation.child", "", "internal: run the schedule in this JSON file and write its result beside it")
	flagInspect   = flag.String("simulation.inspect", "", "internal: the inspect binary the parent built")
	flagInProcess = flag.Bool("simulation.inprocess", false, "run schedules in the test's process, not one process each")
)

// childResult is what a child writes: its run's failure, or none.
type childResult struct {
	Fail  *Failure
	Stats map[string]int // the run's counts (Env.Stats)
}

// runChild is TestSimulation in a child: it runs the schedule in
// *flagChild and writes the result to *flagChild+".result", each step's
// trace line to *flagChild+".trace" as it runs.
func runChild(t *testing.T) {
	raw, err := os.ReadFile(*flagChild)
	if err != nil {
		t.Fatal(err)
	}
	var sched Schedule
	if err := json.Unmarshal(raw, &sched); err != nil {
		t.Fatal(err)
	}
	trace, err := os.Create(*flagChild + ".trace")
	if err != nil {
		t.Fatal(err)
	}
	defer trace.Close()
	progress := make(chan struct{}, 1)
	logf := func(format string, args ...any) {
		fmt.Fprintf(trace, format+"\n", args...)
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	defer close(done)
	go watchdog(progress, done, 3**flagTimeout+10*time.Second)
	var stats map[string]int
	fail := Run(sched, Env{Dir: t.TempDir(), Verify: verifyFile, Timeout: *flagTimeout, Logf: logf,
		Stats: func(m map[string]int) { stats = m }})
	out, err := json.Marshal(childResult{Fail: fail, Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*flagChild+".result", out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// watchdog ends a child whose run makes no progress (logs no step) for
// limit, longer than any wait of the run: a hang, such as a read that waits
// for a list that never comes. It prints the goroutines that run the
// library's code, for the failure, and exits.
func watchdog(progress <-chan struct{}, done <-chan struct{}, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-progress:
			t.Reset(limit)
		case <-t.C:
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			var keep []string
			for _, g := range strings.Split(string(buf), "\n\n") {
				if strings.Contains(g, "boltinformer/") && !strings.Contains(g, "simulation.watchdog") {
					keep = append(keep, g)
				}
			}
			fmt.Fprintf(os.Stderr, "panic: the run made no progress for %v (a hang); the goroutines in the library:\n\n%s\n", limit, strings.Join(keep, "\n\n"))
			os.Exit(2)
		}
	}
}

// runInChild runs sched in a child process, in dir, and returns its
// failure. A child that ends without a result crashed: its failure is the
// crash, after the last step its trace began. logf, if set, receives the
// trace once the child has ended; stats, if set, the run's counts.
func runInChild(sched Schedule, dir string, logf func(string, ...any), stats func(map[string]int)) *Failure {
	file := filepath.Join(dir, "schedule.json")
	raw, err := json.Marshal(sched)
	if err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	if err := buildInspect(); err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	// A hang the run's own timeouts do not catch still ends.
	limit := time.Duration(len(sched.Steps)+2)*2**flagTimeout + time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSimulation$",
		"-simulation.child="+file, "-simulation.inspect="+inspectBin,
		fmt.Sprintf("-simulation.timeout=%v", *flagTimeout))
	// The race detector sleeps a second before a process exits.
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	runErr := cmd.Run()

	traceRaw, _ := os.ReadFile(file + ".trace")
	trace := strings.Split(strings.TrimRight(string(traceRaw), "\n"), "\n")
	if logf != nil {
		for _, line := range trace {
			logf("%s", line)
		}
	}
	var res childResult
	resRaw, err := os.ReadFile(file + ".result")
	if err == nil {
		if err := json.Unmarshal(resRaw, &res); err != nil {
			return &Failure{Step: -1, What: fmt.Sprintf("the child's result: %v", err), Trace: trace}
		}
		if stats != nil && res.Stats != nil {
			stats(res.Stats)
		}
		if res.Fail != nil {
			return res.Fail
		}
		if runErr != nil {
			// The run passed, and what ran after it failed: goleak.
			return &Failure{Step: -1, What: fmt.Sprintf("the run's process failed after the run (%v): %s", runErr, tail(output.String(), 40)), Trace: trace}
		}
		return nil
	}
	what := "the run's process crashed"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		what = fmt.Sprintf("the run's process hung (killed after %v)", limit)
	}
	return &Failure{Step: lastStep(trace), What: fmt.Sprintf("%s: %v\n%s", what, runErr, panicOf(output.String())), Trace: trace}
}

// lastStep returns the index of the last step a trace began, -1 if none.
func lastStep(trace []string) int {
	step := -1
	for _, line := range trace {
		var n int
		if _, err := fmt.Sscanf(line, "%d ", &n); err == nil {
			step = n
		}
	}
	return step
}

// panicOf returns a crashed child's panic and the stack of the goroutine
// that panicked, from its output.
func panicOf(out string) string {
	i := strings.Index(out, "panic: ")
	if i < 0 {
		return tail(out, 40)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out[i:]))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// A hang's goroutines are all needed: the one that should have ended
	// the wait (a reflector, say) may be the last, or missing.
	hang := strings.Contains(out[i:min(len(out), i+200)], "(a hang)")
	limit := 120
	if hang {
		limit = 2000
	}
	for sc.Scan() && len(lines) < limit {
		if lines = append(lines, sc.Text()); !hang && len(lines) > 3 && sc.Text() == "" {
			break // the end of the panicking goroutine's stack
		}
	}
	return strings.Join(lines, "\n")
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
