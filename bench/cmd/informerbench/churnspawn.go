package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// churnProc is a churn child as the parent drives it (churnchild.go has the
// protocol). Unlike spawn, which runs one child to its end, the parent runs
// several side by side and talks to each in steps, so the child's stdout lines
// arrive on a channel.
//
// Goroutines: one reads stdout into lines and closes it at EOF; a second
// waits for the process and then closes exited (err holds the result).
// Whoever starts a churnProc calls close, which ends both.
type churnProc struct {
	informer string
	logPath  string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	lines    chan string   // stdout, one line per item; closed at EOF
	exited   chan struct{} // closed once the process has been waited for
	err      error         // the process's exit error, valid once exited is closed

	closeOnce sync.Once
	closeErr  error // set by close
}

// startChurnChild starts this binary's churn-child subcommand with spec on
// its stdin and its stderr in logPath.
func startChurnChild(ctx context.Context, spec churnSpec, logPath string) (*churnProc, error) {
	sp, err := startSelf(ctx, churnChildCommand, spec, nil, logPath)
	if err != nil {
		return nil, err
	}
	cmd, stdin, stdout, logf := sp.cmd, sp.stdin, sp.stdout, sp.log
	p := &churnProc{informer: spec.Informer, logPath: logPath, cmd: cmd, stdin: stdin,
		lines: make(chan string, 16), exited: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		defer close(p.exited)
		<-readDone // Wait closes stdout: read it to the end first
		p.err = cmd.Wait()
		logf.Close()
	}()
	if _, err := stdin.Write(sp.spec); err != nil {
		p.close()
		return nil, fmt.Errorf("%s: writing spec: %w", spec.Informer, err)
	}
	return p, nil
}

func (p *churnProc) pid() int { return p.cmd.Process.Pid }

// next returns the child's next stdout line, waiting up to timeout.
func (p *churnProc) next(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.exited
			return "", fmt.Errorf("%s child exited (%v); end of %s:\n%s", p.informer, p.err, p.logPath, tail(p.logPath, 15))
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("%s child: no answer within %v; end of %s:\n%s", p.informer, timeout, p.logPath, tail(p.logPath, 15))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// waitReady waits for the child's READY line.
func (p *churnProc) waitReady(ctx context.Context, timeout time.Duration) error {
	line, err := p.next(ctx, timeout)
	if err != nil {
		return err
	}
	if line != readyLine {
		return fmt.Errorf("%s child: got %q, want %s", p.informer, line, readyLine)
	}
	return nil
}

// start tells the child that the churn begins: it starts its CPU profile,
// if it has one.
func (p *churnProc) start() error {
	if _, err := io.WriteString(p.stdin, churnStartLine+"\n"); err != nil {
		return fmt.Errorf("%s child: writing %s: %w", p.informer, churnStartLine, err)
	}
	return nil
}

// stop tells the child how many changes of each kind succeeded and
// returns its result once it has seen them; the child stays alive (for a
// last /proc sample) until close.
func (p *churnProc) stop(ctx context.Context, ok [numOps]int64) (*churnChildResult, error) {
	if _, err := io.WriteString(p.stdin, stopLine(ok)); err != nil {
		return nil, fmt.Errorf("%s child: writing %s: %w", p.informer, churnStopLine, err)
	}
	line, err := p.next(ctx, churnDrainTimeout+persistTimeout+time.Minute)
	if err != nil {
		return nil, err
	}
	res := &churnChildResult{}
	if err := json.Unmarshal([]byte(line), res); err != nil {
		return nil, fmt.Errorf("%s child result %q: %w", p.informer, line, err)
	}
	return res, nil
}

// end tells a restart child to report and returns its result; the child
// stays alive until close.
func (p *churnProc) end(ctx context.Context) (*churnChildResult, error) {
	if _, err := io.WriteString(p.stdin, churnEndLine+"\n"); err != nil {
		return nil, fmt.Errorf("%s child: writing %s: %w", p.informer, churnEndLine, err)
	}
	line, err := p.next(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	res := &churnChildResult{}
	if err := json.Unmarshal([]byte(line), res); err != nil {
		return nil, fmt.Errorf("%s child result %q: %w", p.informer, line, err)
	}
	return res, nil
}

// close closes the child's stdin, which ends it, and waits for it to exit;
// if it has not within a minute, it is killed. It returns the exit error
// (the same on every call). Lines not read by then are discarded.
func (p *churnProc) close() error {
	p.closeOnce.Do(func() {
		go func() { // the reader must not block on a line nobody will read
			for range p.lines {
			}
		}()
		p.stdin.Close()
		select {
		case <-p.exited:
			p.closeErr = p.err
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.exited
			p.closeErr = errors.Join(fmt.Errorf("%s child did not exit within a minute of stdin closing; killed", p.informer), p.err)
		}
	})
	return p.closeErr
}
