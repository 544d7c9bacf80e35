package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/boltinformer/boltinformer/persist"
)

type compactOptions struct {
	g *globalOptions

	src, dst string
}

func (o *compactOptions) AddFlags(*pflag.FlagSet) {}

func newCompactCommand(g *globalOptions) *cobra.Command {
	o := &compactOptions{g: g}
	cmd := &cobra.Command{
		Use:   "compact [FILE] DST",
		Short: "Write a compacted copy of a stopped cache file",
		Long: `Write a compacted copy of a cache file to DST, a new file: every bucket
rewritten in key order with full pages, free pages dropped. A cache file never
shrinks by itself: after mass deletions (a namespace or a CRD's objects gone)
its free pages are reused but not returned. The copy is about what a fresh
load of the remaining objects takes; inspect stats shows the free space.

FILE is never changed. It must not be open for writing: stop the controller
(or compact a snapshot taken with DB.SnapshotFile), then replace FILE with DST
while the controller is stopped. DST must not exist; it appears only once
complete.`,
		Example: `  inspect compact /var/lib/my-controller/cache.db /var/lib/my-controller/cache.db.compact
  mv /var/lib/my-controller/cache.db.compact /var/lib/my-controller/cache.db`,
		Args: cobra.RangeArgs(1, 2),
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *compactOptions) Complete(args []string) error {
	var err error
	o.dst = args[len(args)-1]
	o.src, err = o.g.fileArg(args[:len(args)-1])
	return err
}

func (o *compactOptions) Validate() error {
	if o.src == o.dst {
		return usageErrorf("DST must be a new file, not %s itself", o.src)
	}
	return nil
}

func (o *compactOptions) Run(out, _ io.Writer) error {
	stats, err := persist.Compact(context.Background(), o.src, o.dst, persist.CompactOptions{LockTimeout: o.g.lockTimeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s -> %s: %s (%.0f%%)\n", o.src, humanBytes(stats.SrcBytes), o.dst, humanBytes(stats.DstBytes),
		100*float64(stats.DstBytes)/float64(max(stats.SrcBytes, 1)))
	return nil
}
