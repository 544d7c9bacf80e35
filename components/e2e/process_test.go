package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// component is one run of a component binary, its output in a log file.
type component struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	exited  chan struct{}
	err     error // set before exited is closed
}

// startComponent runs bin with args, its output in dir/<name>.log. The
// process is SIGKILLed when the test ends if it is still running (and by
// the kernel if the test binary dies first).
func startComponent(t testing.TB, dir, name, bin string, args ...string) *component {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &component{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	t.Logf("%s started (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return c
}

// kill SIGKILLs the process, as a node failure or the OOM killer would, and
// waits until it is gone.
func (c *component) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// running fails the test, with the log's tail, if the process has exited.
func (c *component) running(t testing.TB) {
	t.Helper()
	select {
	case <-c.exited:
		t.Fatalf("%s exited: %v\n%s", c.name, c.err, c.tail(40))
	default:
	}
}

// tail is the last n lines of the log.
func (c *component) tail(n int) string {
	data, _ := os.ReadFile(c.logPath)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s ---\n%s", len(lines), c.logPath, bytes.Join(lines, []byte("\n")))
}
