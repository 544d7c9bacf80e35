package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// churnProc is a churn child as the parent drives it (churnchild.go has the
// protocol). The parent runs several side by side and talks to each in
// steps. Whoever starts a churnProc calls close.
type churnProc struct {
	*benchkit.Child
	informer string
	file     string // boltinformer's cache file, "" for client-go
}

// startChurnChild starts this binary's churn-child subcommand with spec on
// its stdin and its stderr in logPath. A client-go-list child gets the
// WatchListClient gate off in its environment.
func startChurnChild(ctx context.Context, spec churnSpec, logPath string) (*churnProc, error) {
	var env []string
	if spec.Informer == informerClientGoList {
		env = listEnv()
	}
	c, err := benchkit.StartSelf(ctx, churnChildCommand, spec, env, logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Informer, err)
	}
	return &churnProc{Child: c, informer: spec.Informer, file: spec.File}, nil
}

// next returns the child's next stdout line, waiting up to timeout.
func (p *churnProc) next(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-p.Lines:
		if !ok {
			<-p.Exited()
			return "", fmt.Errorf("%s child exited (%v); end of %s:\n%s", p.informer, p.Err(), p.LogPath, benchkit.Tail(p.LogPath, 15))
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("%s child: no answer within %v; end of %s:\n%s", p.informer, timeout, p.LogPath, benchkit.Tail(p.LogPath, 15))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

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

// stop tells the child how many changes of each kind succeeded and
// returns its result once it has seen them; the child stays alive (for a
// last /proc sample) until close.
func (p *churnProc) stop(ctx context.Context, ok [numOps]int64) (*churnChildResult, error) {
	if err := json.NewEncoder(p.Stdin).Encode(ok); err != nil {
		return nil, fmt.Errorf("%s child: writing the changes made: %w", p.informer, err)
	}
	return p.result(ctx, churnDrainTimeout+persistTimeout+time.Minute)
}

// reads asks a child that has given its result for its read prices
// (protocol step 6) and waits for them.
func (p *churnProc) reads(ctx context.Context) (*readPrices, error) {
	if _, err := fmt.Fprintln(p.Stdin, readsLine); err != nil {
		return nil, fmt.Errorf("%s child: asking for reads: %w", p.informer, err)
	}
	line, err := p.next(ctx, readsTimeout)
	if err != nil {
		return nil, err
	}
	prices := &readPrices{}
	if err := json.Unmarshal([]byte(line), prices); err != nil {
		return nil, fmt.Errorf("%s child reads %q: %w", p.informer, line, err)
	}
	return prices, nil
}

// fileRecords asks a boltinformer child that has given its result for its
// file's records (protocol step 6) and waits for them.
func (p *churnProc) fileRecords(ctx context.Context) (*churnFile, error) {
	if _, err := fmt.Fprintln(p.Stdin, fileLine); err != nil {
		return nil, fmt.Errorf("%s child: asking for its file: %w", p.informer, err)
	}
	line, err := p.next(ctx, readsTimeout)
	if err != nil {
		return nil, err
	}
	f := &churnFile{}
	if err := json.Unmarshal([]byte(line), f); err != nil {
		return nil, fmt.Errorf("%s child file %q: %w", p.informer, line, err)
	}
	return f, nil
}

// result reads the child's result, waiting up to timeout.
func (p *churnProc) result(ctx context.Context, timeout time.Duration) (*churnChildResult, error) {
	line, err := p.next(ctx, timeout)
	if err != nil {
		return nil, err
	}
	res := &churnChildResult{}
	if err := json.Unmarshal([]byte(line), res); err != nil {
		return nil, fmt.Errorf("%s child result %q: %w", p.informer, line, err)
	}
	return res, nil
}

// close closes the child's stdin, which ends it, and waits up to a minute
// for it to exit before killing it. Lines not read by then are discarded.
func (p *churnProc) close() error { return p.Stop(time.Minute) }
