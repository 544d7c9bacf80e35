package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// outputKey prints only the keys an index maps a value to.
const outputKey = "key"

type indexOptions struct {
	g     *globalOptions
	print *objectPrintFlags

	file       string
	collection string
	index      string
	value      string
	hasValue   bool
}

func (o *indexOptions) AddFlags(cmd *cobra.Command) {
	o.print.AddFlags(cmd.Flags(), outputKey+" (keys only, read from the index without decoding objects)")
}

func newIndexCommand(g *globalOptions) *cobra.Command {
	o := &indexOptions{g: g, print: &objectPrintFlags{}}
	cmd := &cobra.Command{
		Use:   "index COLLECTION [INDEX [VALUE]] -f FILE",
		Short: "Show a collection's secondary indexes, their values, and the objects of a value",
		Long: `Show a collection's secondary indexes as stored in the file.

  index COLLECTION               the indexes, with their versions, values and entries
  index COLLECTION INDEX         the values of INDEX and how many keys each has
  index COLLECTION INDEX VALUE   the objects INDEX maps VALUE to (as get prints them)

COLLECTION may be a resource name, as for get. Indexes are read as stored:
this shows what the informer's listers would have answered, not what the
index functions would compute today.`,
		Example: `  inspect index pods -f cache.db
  inspect index pods namespace -f cache.db
  inspect index pods namespace storefront -f cache.db -o wide
  inspect index pods node ip-10-0-1-11.eu-west-1.compute.internal -f cache.db -o key`,
		Args:              cobra.RangeArgs(1, 3),
		ValidArgsFunction: g.completeCollectionFirst,
		RunE:              runE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *indexOptions) Complete(args []string) error {
	var err error
	if o.file, err = o.g.fileArg(nil); err != nil {
		return err
	}
	o.collection = args[0]
	if len(args) > 1 {
		o.index = args[1]
	}
	if len(args) > 2 {
		o.value, o.hasValue = args[2], true
	}
	return nil
}

func (o *indexOptions) Validate() error {
	if !o.hasValue && o.print.output != outputTable && o.print.output != "table" {
		return usageErrorf("-o applies to the objects of a value: give COLLECTION INDEX VALUE")
	}
	if o.print.output == outputKey {
		return nil
	}
	return o.print.validate()
}

func (o *indexOptions) Run(out, errOut io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := f.resolve(o.collection)
	if err != nil {
		return err
	}
	if o.index == "" {
		return o.listIndexes(out, f, c)
	}
	if _, ok := c.Indexes[o.index]; !ok {
		return fmt.Errorf("collection %q has no index %q; it has: %s", c.Name, o.index, orNone(strings.Join(c.indexNames(), ", ")))
	}
	if !o.hasValue {
		return o.listValues(out, f, c)
	}
	return o.listObjects(out, errOut, f, c)
}

// indexCounts counts an index's distinct values and entries, and the keys
// per value in value order.
type indexCounts struct {
	entries int
	values  []string
	keys    map[string]int
}

func countIndex(r *inspectfile.Collection, index string) (indexCounts, error) {
	ic := indexCounts{keys: map[string]int{}}
	err := r.ForEachIndexEntry(index, func(value, _ string, raw []byte, err error) error {
		if err != nil {
			return fmt.Errorf("index %q: %w (run 'inspect verify')", index, err)
		}
		ic.entries++
		if ic.keys[value] == 0 {
			ic.values = append(ic.values, value)
		}
		ic.keys[value]++
		return nil
	})
	return ic, err
}

func (o *indexOptions) listIndexes(out io.Writer, f *cacheFile, c *collection) error {
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "INDEX\tVALUES\tENTRIES\tVERSION")
	err := f.file.View(c.Name, func(r *inspectfile.Collection) error {
		for _, name := range c.indexNames() {
			ic, err := countIndex(r, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", name, len(ic.values), ic.entries, orNone(c.Indexes[name]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.Flush()
}

func (o *indexOptions) listValues(out io.Writer, f *cacheFile, c *collection) error {
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "VALUE\tKEYS")
	err := f.file.View(c.Name, func(r *inspectfile.Collection) error {
		ic, err := countIndex(r, o.index)
		if err != nil {
			return err
		}
		for _, v := range ic.values {
			fmt.Fprintf(w, "%s\t%d\n", v, ic.keys[v])
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.Flush()
}

// listObjects prints the objects of one value, looked up the way the
// informer's listers look them up (Collection.IndexKeys).
func (o *indexOptions) listObjects(out, errOut io.Writer, f *cacheFile, c *collection) error {
	coll, err := f.db.Collection(c.Name, persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		return err
	}
	keys, err := coll.IndexKeys(o.index, o.value)
	if err != nil {
		return err
	}
	if o.print.output == outputKey {
		for _, k := range keys {
			fmt.Fprintln(out, k)
		}
		return nil
	}
	if len(keys) == 0 {
		fmt.Fprintf(errOut, "No objects found: index %q of collection %q has no value %q.\n", o.index, c.Name, o.value)
		return nil
	}
	p, err := f.newPrinter(out, printOptions{
		flags:         o.print,
		allNamespaces: true,
		content:       contentOptions{showSecrets: o.g.showSecrets},
		now:           o.g.now(),
	})
	if err != nil {
		return err
	}
	var bad []undecodable
	err = f.file.View(c.Name, func(r *inspectfile.Collection) error {
		for _, k := range keys {
			rec, err := r.Record(k)
			if err != nil {
				return err
			}
			if rec == nil {
				bad = append(bad, undecodable{k, fmt.Errorf("indexed under %q but not stored (run 'inspect verify')", o.value)})
				continue
			}
			obj, err := f.decode(c, k, rec)
			if err != nil {
				bad = append(bad, undecodable{k, err})
				continue
			}
			if err := p.print(obj); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	warnUndecodable(errOut, c, bad)
	return p.flush()
}
