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
	defer logf.Close()
	cmd := exec.CommandContext(ctx, exe, childCommand)
	cmd.Stderr = logf
	if spec.NoWatchList {
		cmd.Env = append(os.Environ(), watchListEnv+"=false")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := stdin.Write(append(in, '\n')); err != nil {
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

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
