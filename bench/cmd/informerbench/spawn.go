package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// spawn runs spec in a new child process (this binary, child subcommand)
// and returns its result. onReady, if set, runs when the child prints READY
// and makes the updates the child then waits for; GO follows. The child's
// stderr goes to logPath.
func spawn(ctx context.Context, spec childSpec, logPath string, onReady func() error) (*childResult, error) {
	var env []string
	if spec.NoWatchList {
		env = append(os.Environ(), watchListEnv+"=false")
	}
	p, err := startSelf(ctx, childCommand, spec, env, logPath)
	if err != nil {
		return nil, err
	}
	defer p.log.Close()
	cmd, stdin, stdout := p.cmd, p.stdin, p.stdout
	defer stdin.Close()
	if _, err := stdin.Write(p.spec); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s: writing spec: %w", spec.Variant, err)
	}
	var res *childResult
	var protoErr error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		switch line := sc.Bytes(); {
		case string(line) == readyLine && onReady != nil && protoErr == nil:
			if protoErr = onReady(); protoErr == nil {
				_, protoErr = io.WriteString(stdin, goLine+"\n")
			}
			if protoErr != nil {
				_ = cmd.Process.Kill()
			}
		case bytes.HasPrefix(line, []byte("{")) && protoErr == nil:
			res = &childResult{}
			if err := json.Unmarshal(line, res); err != nil {
				protoErr = fmt.Errorf("child result: %w", err)
			}
		}
	}
	waitErr := cmd.Wait()
	switch {
	case protoErr != nil:
		return nil, fmt.Errorf("%s: %w", spec.Variant, protoErr)
	case waitErr != nil || res == nil:
		return nil, fmt.Errorf("%s: child failed (%v); end of %s:\n%s", spec.Variant, waitErr, logPath, tail(logPath, 15))
	}
	return res, nil
}

// selfProc is a started child process of this binary: its spec (JSON and a
// newline) is for the caller to write to stdin, and log, its stderr, for
// the caller to close once the process has been waited for.
type selfProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	log    *os.File
	spec   []byte
}

// startSelf starts this binary's subcommand with env (nil: this process's)
// and its stderr in logPath, and encodes spec for it.
func startSelf(ctx context.Context, subcommand string, spec any, env []string, logPath string) (*selfProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, subcommand)
	cmd.Stderr = logf
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &selfProc{cmd: cmd, stdin: stdin, stdout: stdout, log: logf, spec: append(in, '\n')}, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
