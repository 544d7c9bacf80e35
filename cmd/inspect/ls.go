package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type lsOptions struct {
	g      *globalOptions
	output string

	file string
}

func (o *lsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.output, "output", "o", "", "Output format: table, wide (adds kind and indexes), yaml or json.")
}

func newLsCommand(g *globalOptions) *cobra.Command {
	o := &lsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls [FILE]",
		Aliases: []string{"collections"},
		Short:   "List the collections of a cache file",
		Long: `List the collections of a cache file: what each informer lists (resource,
namespace, selectors, from the collection's description), how many objects it
holds, the resourceVersion it would resume from, when it last committed, and
the size of its records.

The description is what the informer was created with; a collection without
one shows the resource of its first record and <unknown> scope.`,
		Example: `  inspect ls cache.db
  inspect ls -f cache.db -o wide
  inspect ls cache.db -o json | jq '.[] | select(.objects > 1000) | .collection'`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *lsOptions) Complete(args []string) error {
	var err error
	o.file, err = o.g.fileArg(args)
	if o.output == "table" {
		o.output = outputTable
	}
	return err
}

func (o *lsOptions) Validate() error {
	return validateOutput(o.output, outputWide, outputYAML, outputJSON)
}

// lsEntry is one collection in ls -o json|yaml.
type lsEntry struct {
	Collection      string            `json:"collection"`
	Resource        string            `json:"resource,omitempty"`
	Group           string            `json:"group,omitempty"`
	Version         string            `json:"version,omitempty"`
	Kind            string            `json:"kind,omitempty"`
	Guessed         bool              `json:"guessedFromRecords,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	LabelSelector   string            `json:"labelSelector,omitempty"`
	FieldSelector   string            `json:"fieldSelector,omitempty"`
	Objects         int               `json:"objects"`
	Bytes           int64             `json:"bytes"`
	ResourceVersion string            `json:"resourceVersion"`
	LastCommit      *time.Time        `json:"lastCommit,omitempty"`
	Indexes         map[string]string `json:"indexes,omitempty"`
	Description     map[string]string `json:"description,omitempty"`
}

func (o *lsOptions) Run(out, _ io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	if o.output == outputJSON || o.output == outputYAML {
		entries := make([]lsEntry, 0, len(f.collections))
		for _, c := range f.collections {
			e := lsEntry{
				Collection: c.Name, Resource: c.Resource, Group: c.Group, Version: c.Version, Kind: c.Kind,
				Guessed: c.Guessed, Namespace: c.Namespace, LabelSelector: c.LabelSelector, FieldSelector: c.FieldSelector,
				Objects: c.Objects, Bytes: c.Bytes, ResourceVersion: c.ResourceVersion,
				Indexes: c.Indexes, Description: c.Description,
			}
			if !c.Committed.IsZero() {
				t := c.Committed.UTC()
				e.LastCommit = &t
			}
			entries = append(entries, e)
		}
		return writeStructured(out, o.output, entries)
	}
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	header := "COLLECTION\tRESOURCE\tNAMESPACE\tSELECTORS\tOBJECTS\tRESOURCEVERSION\tLAST COMMIT\tSIZE"
	if o.output == outputWide {
		header += "\tKIND\tINDEXES"
	}
	fmt.Fprintln(w, header)
	for _, c := range f.collections {
		ns, sel := "<all>", orNone(c.selectors())
		if c.Namespace != "" {
			ns = c.Namespace
		}
		if len(c.Description) == 0 {
			ns, sel = "<unknown>", "<unknown>"
		}
		commit := "<never>"
		if !c.Committed.IsZero() {
			commit = c.Committed.UTC().Format(time.RFC3339)
		}
		row := []string{c.Name, orUnknown(c.GroupResource()), ns, sel, fmt.Sprint(c.Objects),
			orNone(c.ResourceVersion), commit, humanBytes(c.Bytes)}
		if o.output == outputWide {
			kind := "<unknown>"
			if c.Kind != "" {
				kind = c.Kind + "." + c.Version
				if c.Group != "" {
					kind += "." + c.Group
				}
			}
			row = append(row, kind, orNone(strings.Join(c.indexNames(), ",")))
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}

// humanBytes prints a size in binary units, as "4.2MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
