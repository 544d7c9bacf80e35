package benchkit

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ChildOptions say how to start a child process.
type ChildOptions struct {
	Path string
	Args []string
	// Env is the child's environment; nil: this process's.
	Env []string
	// LogPath receives the child's stderr, and its stdout unless Pipes.
	LogPath string
	// Pipes gives the parent the child's stdin and its stdout as Lines.
	Pipes bool
	// SysProcAttr, if set, is the child's (e.g. a Pdeathsig).
	SysProcAttr *syscall.SysProcAttr
}

// Child is a started child process.
//
// Goroutines: with Pipes one reads stdout into Lines and closes it at EOF;
// one waits for the process (after stdout's EOF, since Wait closes the
// pipe), closes the log and then Exited. Whoever starts a Child waits on
// Exited or calls Stop; with Pipes it must read Lines to the end.
type Child struct {
	Cmd     *exec.Cmd
	LogPath string
	Started time.Time
	// Stdin and Lines are set with Pipes only.
	Stdin io.WriteCloser
	Lines chan string

	exited chan struct{}
	err    error // valid once exited is closed
}

// StartChild starts a process as o says; ctx's end kills it.
func StartChild(ctx context.Context, o ChildOptions) (*Child, error) {
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.Path, o.Args...)
	cmd.Env, cmd.Stderr, cmd.SysProcAttr = o.Env, logf, o.SysProcAttr
	c := &Child{Cmd: cmd, LogPath: o.LogPath, exited: make(chan struct{})}
	var stdout io.ReadCloser
	if o.Pipes {
		if c.Stdin, err = cmd.StdinPipe(); err == nil {
			stdout, err = cmd.StdoutPipe()
		}
		if err != nil {
			logf.Close()
			return nil, err
		}
		c.Lines = make(chan string, 16)
	} else {
		cmd.Stdout = logf
	}
	c.Started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		defer close(c.exited)
		if stdout != nil {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				c.Lines <- sc.Text()
			}
			close(c.Lines)
		}
		c.err = cmd.Wait()
		logf.Close()
	}()
	return c, nil
}

// StartSelf starts this binary's subcommand with Pipes and writes spec to
// its stdin as one JSON line.
func StartSelf(ctx context.Context, subcommand string, spec any, env []string, logPath string) (*Child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c, err := StartChild(ctx, ChildOptions{Path: exe, Args: []string{subcommand}, Env: env, LogPath: logPath, Pipes: true})
	if err != nil {
		return nil, err
	}
	if _, err := c.Stdin.Write(append(in, '\n')); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// Pid is the child's process ID.
func (c *Child) Pid() int { return c.Cmd.Process.Pid }

// Exited is closed once the child has exited and been waited for.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Err is the child's exit error; valid once Exited is closed.
func (c *Child) Err() error { return c.err }

// Kill kills the child and waits for it, discarding unread Lines.
func (c *Child) Kill() {
	_ = c.Cmd.Process.Kill()
	c.drain()
	<-c.exited
}

// Stop asks the child to stop (SIGTERM, and stdin closed with Pipes),
// waits up to grace, then kills it. It returns the exit error.
func (c *Child) Stop(grace time.Duration) error {
	c.drain()
	if c.Stdin != nil {
		c.Stdin.Close()
	} else {
		_ = c.Cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.Kill()
	}
	return c.err
}

// drain reads the Lines nobody will read, so the reader can reach EOF.
func (c *Child) drain() {
	if c.Lines != nil {
		go func() {
			for range c.Lines {
			}
		}()
	}
}

// Tail returns the last n lines of a file, e.g. a failed child's log.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
