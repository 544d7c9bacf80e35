package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/boltinformer/boltinformer/persist"
)

type checkpointsOptions struct {
	g     *globalOptions
	clear bool

	file       string
	collection string
	name       string
}

func (o *checkpointsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.clear, "clear", false, "Drop every acknowledgement of the checkpoint COLLECTION NAME (the file must not be in use): its handler is given every stored object again at its next start. The one change inspect makes to a file.")
}

func newCheckpointsCommand(g *globalOptions) *cobra.Command {
	o := &checkpointsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "checkpoints [COLLECTION [NAME]] -f FILE",
		Short: "Show the handlers' checkpoints: what they acknowledged, and what changed since",
		Long: `Show the checkpoints of handlers and reconcilers (cache.Checkpoint,
boltcr.Checkpoint): for each, how many stored objects it acknowledged, how
many of those changed since their acknowledgement (stored at another
resourceVersion: the handler gets them at its next start), and how many
stored objects it never acknowledged (it gets those too).

  checkpoints                    every checkpoint of every collection
  checkpoints COLLECTION NAME    each key: acknowledged and stored resourceVersion

With --clear, COLLECTION NAME's acknowledgements are dropped: on its next
start the handler is given every stored object, as without a checkpoint.
Use it after changing what the handler does, or to force a full pass. It
needs the file to itself (stop the controller first).`,
		Example: `  inspect checkpoints -f cache.db
  inspect checkpoints pods pod-controller -f cache.db
  inspect checkpoints pods pod-controller -f cache.db --clear`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: g.completeCollectionFirst,
		RunE:              runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *checkpointsOptions) Complete(args []string) error {
	var err error
	if o.file, err = o.g.fileArg(nil); err != nil {
		return err
	}
	if len(args) > 0 {
		o.collection = args[0]
	}
	if len(args) > 1 {
		o.name = args[1]
	}
	return nil
}

func (o *checkpointsOptions) Validate() error {
	if o.collection != "" && o.name == "" {
		return usageErrorf("give a checkpoint NAME after COLLECTION (the list without arguments shows them)")
	}
	if o.clear && o.name == "" {
		return usageErrorf("--clear needs COLLECTION NAME")
	}
	return nil
}

func (o *checkpointsOptions) Run(out, _ io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	if o.clear {
		c, err := f.resolve(o.collection)
		f.Close()
		if err != nil {
			return err
		}
		return o.clearCheckpoint(out, c.Name)
	}
	defer f.Close()
	if o.name != "" {
		c, err := f.resolve(o.collection)
		if err != nil {
			return err
		}
		return o.listKeys(out, f, c.Name)
	}
	return o.listCheckpoints(out, f)
}

// checkpointCounts compares a checkpoint's acknowledgements with the stored
// objects' resourceVersions.
type checkpointCounts struct {
	acknowledged, changed, unacknowledged int
}

func countCheckpoint(acks, stored map[string]string) checkpointCounts {
	var n checkpointCounts
	for key, rv := range stored {
		switch acked, ok := acks[key]; {
		case !ok:
			n.unacknowledged++
		case acked == rv:
			n.acknowledged++
		default:
			n.acknowledged++
			n.changed++
		}
	}
	return n
}

func (o *checkpointsOptions) listCheckpoints(out io.Writer, f *cacheFile) error {
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "COLLECTION\tCHECKPOINT\tACKNOWLEDGED\tCHANGED SINCE\tNOT ACKNOWLEDGED")
	rows := 0
	for _, c := range f.collections {
		coll, err := f.db.Collection(c.Name, persist.CollectionOptions{CacheObjects: 1})
		if err != nil {
			return err
		}
		names, err := coll.Checkpoints()
		if err != nil || len(names) == 0 {
			if err != nil {
				return fmt.Errorf("collection %q: %w", c.Name, err)
			}
			continue
		}
		stored, err := coll.ResourceVersions()
		if err != nil {
			return fmt.Errorf("collection %q: %w", c.Name, err)
		}
		sort.Strings(names)
		for _, name := range names {
			acks, err := coll.CheckpointAcks(name)
			if err != nil {
				return err
			}
			n := countCheckpoint(acks, stored)
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", c.Name, name, n.acknowledged, n.changed, n.unacknowledged)
			rows++
		}
	}
	if rows == 0 {
		fmt.Fprintf(out, "No checkpoints in %s.\n", f.path)
		return nil
	}
	return w.Flush()
}

// listKeys prints every key stored or acknowledged, with both
// resourceVersions and what the handler gets at its next start.
func (o *checkpointsOptions) listKeys(out io.Writer, f *cacheFile, collection string) error {
	coll, err := f.db.Collection(collection, persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		return err
	}
	if err := o.requireCheckpoint(coll); err != nil {
		return err
	}
	acks, err := coll.CheckpointAcks(o.name)
	if err != nil {
		return err
	}
	stored, err := coll.ResourceVersions()
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(stored))
	for k := range stored {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "KEY\tACKNOWLEDGED\tSTORED\tAT NEXT START")
	for _, k := range keys {
		acked, ok := acks[k]
		state := "skipped"
		switch {
		case !ok:
			acked, state = "<none>", "given"
		case acked != stored[k]:
			state = "given (changed)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k, acked, stored[k], state)
	}
	return w.Flush()
}

// clearCheckpoint opens the file for writing and drops the checkpoint's
// acknowledgements.
func (o *checkpointsOptions) clearCheckpoint(out io.Writer, collection string) error {
	db, err := persist.Open(o.file, persist.Options{Scheme: o.g.scheme, LockTimeout: o.g.lockTimeout})
	if err != nil {
		if errors.Is(err, persist.ErrLocked) {
			return fmt.Errorf("%w: --clear changes the file, so it needs it to itself; stop the process that has it open first", err)
		}
		return err
	}
	defer db.Close()
	coll, err := db.Collection(collection, persist.CollectionOptions{})
	if err != nil {
		return err
	}
	if err := o.requireCheckpoint(coll); err != nil {
		return err
	}
	cp, err := coll.Checkpoint(o.name)
	if err != nil {
		return err
	}
	n := cp.Len()
	if err := cp.Clear(); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "Cleared checkpoint %q of collection %q (%d acknowledgements dropped).\n", o.name, collection, n)
	return nil
}

// requireCheckpoint fails, naming the checkpoints there are, unless coll has
// the checkpoint o names.
func (o *checkpointsOptions) requireCheckpoint(coll *persist.Collection) error {
	names, err := coll.Checkpoints()
	if err != nil {
		return err
	}
	if !slices.Contains(names, o.name) {
		return fmt.Errorf("collection %q has no checkpoint %q; it has: %s", coll.Name(), o.name, orNone(joinSorted(names)))
	}
	return nil
}

func joinSorted(names []string) string {
	return strings.Join(slices.Sorted(slices.Values(names)), ", ")
}
