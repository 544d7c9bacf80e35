package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "informerbench:", err)
		os.Exit(1)
	}
}

// run dispatches to a subcommand; the default is the benchmark itself.
func run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case childCommand:
			return runChild(ctx, os.Stdin, os.Stdout)
		case churnChildCommand:
			return runChurnChild(ctx, os.Stdin, os.Stdout)
		case "churn":
			return runChurn(ctx, args[1:], os.Stdout)
		case "steady":
			return runSteady(ctx, args[1:], os.Stdout)
		case "demo":
			return runDemo(ctx, args[1:], os.Stdout)
		case "recover":
			return runRecover(ctx, args[1:], os.Stdout)
		}
	}
	return runBench(ctx, args, os.Stdout)
}
