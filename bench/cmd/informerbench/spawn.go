package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// spawn runs spec in a new child process (this binary, child subcommand)
// and returns its result. The child's stderr goes to logPath.
func spawn(ctx context.Context, spec childSpec, logPath string) (*childResult, error) {
	var env []string
	if spec.NoWatchList {
		env = listEnv()
	}
	c, err := benchkit.StartSelf(ctx, childCommand, spec, env, logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Variant, err)
	}
	defer c.Stdin.Close()
	var res *childResult
	var protoErr error
	for line := range c.Lines { // read to the end, so the child never blocks
		if protoErr == nil && strings.HasPrefix(line, "{") {
			res = &childResult{}
			protoErr = json.Unmarshal([]byte(line), res)
		}
	}
	<-c.Exited()
	switch {
	case protoErr != nil:
		return nil, fmt.Errorf("%s: child result: %w", spec.Variant, protoErr)
	case c.Err() != nil || res == nil:
		return nil, fmt.Errorf("%s: child failed (%v); end of %s:\n%s", spec.Variant, c.Err(), logPath, benchkit.Tail(logPath, 15))
	}
	return res, nil
}
