package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

type statsOptions struct {
	g      *globalOptions
	output string

	file string
}

func (o *statsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.output, "output", "o", "", "Output format: table, yaml or json.")
}

func newStatsCommand(g *globalOptions) *cobra.Command {
	o := &statsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "stats [FILE]",
		Short: "Show file, page and bucket statistics",
		Long: `Show the file's size and pages (how much is data, how much is free for reuse),
then per collection its objects, record bytes, index entries and the pages it
occupies, then bbolt's statistics of every bucket of every collection.
Objects and index entries count the collection's state with its journal
applied; a collection with a journal (changes committed but not yet folded
into its trees) also lists the journal's generations.

PAGES counts logical branch and leaf pages, OVERFLOW the extra physical pages
of large ones; ALLOCATED is their size, IN USE the bytes they hold, and a
bucket small enough to live inside its parent's page shows as inline.`,
		Example: `  inspect stats cache.db
  inspect stats cache.db -o json | jq '.collections[] | {name, allocated}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *statsOptions) Complete(args []string) error {
	var err error
	o.file, err = o.g.fileArg(args)
	if o.output == "table" {
		o.output = outputTable
	}
	return err
}

func (o *statsOptions) Validate() error { return validateOutput(o.output, outputYAML, outputJSON) }

// statsReport is stats -o json|yaml.
type statsReport struct {
	File         string            `json:"file"`
	Schema       int               `json:"schema"`
	Created      time.Time         `json:"created"`
	FileSize     int64             `json:"fileSize"`
	DataSize     int64             `json:"dataSize"`
	PageSize     int               `json:"pageSize"`
	Pages        int               `json:"pages"`
	FreePages    int               `json:"freePages"`
	PendingPages int               `json:"pendingPages"`
	TxID         int               `json:"txid"`
	Collections  []collectionStats `json:"collections"`
}

type collectionStats struct {
	Name         string        `json:"name"`
	Objects      int           `json:"objects"`
	RecordBytes  int64         `json:"recordBytes"`
	IndexEntries int           `json:"indexEntries"`
	Pages        int           `json:"pages"`
	Allocated    int           `json:"allocated"`
	InUse        int           `json:"inUse"`
	Buckets      []bucketStats `json:"buckets"`
	// Journal lists the journal's generations, oldest first; none without
	// a journal.
	Journal []journalStats `json:"journal,omitempty"`
}

type journalStats struct {
	Generation uint64 `json:"generation"`
	Entries    int    `json:"entries"`
	Bytes      int64  `json:"bytes"`
	// FoldedThrough is the last key folded into the trees, set on the
	// oldest generation while it is being folded.
	FoldedThrough string `json:"foldedThrough,omitempty"`
}

type bucketStats struct {
	Bucket    string `json:"bucket"`
	Keys      int    `json:"keys"`
	Depth     int    `json:"depth"`
	Pages     int    `json:"pages"`
	Overflow  int    `json:"overflowPages"`
	Allocated int    `json:"allocated"`
	InUse     int    `json:"inUse"`
	Inline    bool   `json:"inline,omitempty"`
}

func toBucketStats(s inspectfile.BucketStats) bucketStats {
	return bucketStats{
		Bucket:    s.Bucket,
		Keys:      s.KeyN,
		Depth:     s.Depth,
		Pages:     s.BranchPageN + s.LeafPageN,
		Overflow:  s.BranchOverflowN + s.LeafOverflowN,
		Allocated: s.BranchAlloc + s.LeafAlloc,
		InUse:     s.BranchInuse + s.LeafInuse,
		Inline:    s.InlineBucketN > 0 && s.BranchPageN+s.LeafPageN == 0,
	}
}

func (o *statsOptions) Run(out, _ io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	fs, err := f.file.Stats()
	if err != nil {
		return err
	}
	rep := statsReport{
		File: f.path, Schema: fs.Schema, Created: fs.Created.UTC(), FileSize: fs.FileSize, DataSize: fs.DataSize,
		PageSize: fs.PageSize, Pages: fs.Pages, FreePages: fs.FreePages, PendingPages: fs.PendingPages, TxID: fs.TxID,
	}
	for _, c := range f.collections {
		cs := collectionStats{Name: c.Name, Objects: c.Objects, RecordBytes: c.Bytes}
		err := f.file.View(c.Name, func(r *inspectfile.Collection) error {
			stats, err := r.Stats()
			if err != nil {
				return err
			}
			for _, s := range stats {
				b := toBucketStats(s)
				if s.Bucket == "" {
					cs.Pages, cs.Allocated, cs.InUse = b.Pages+b.Overflow, b.Allocated, b.InUse
					continue
				}
				if strings.HasSuffix(s.Bucket, "/byValue") {
					cs.IndexEntries += s.KeyN
				}
				cs.Buckets = append(cs.Buckets, b)
			}
			return journalStatsOf(r, &cs)
		})
		if err != nil {
			return fmt.Errorf("collection %q: %w", c.Name, err)
		}
		rep.Collections = append(rep.Collections, cs)
	}
	if o.output != outputTable {
		return writeStructured(out, o.output, rep)
	}
	return printStats(out, rep)
}

// journalStatsOf fills in the collection's journal and, if the journal
// holds entries or the byValue buckets are owed, counts its index entries
// with the journal applied (the byValue buckets' keys count only the
// trees').
func journalStatsOf(r *inspectfile.Collection, cs *collectionStats) error {
	j, err := r.Journal()
	if err != nil {
		return fmt.Errorf("%w (run 'inspect verify')", err)
	}
	entries := 0
	for i, gen := range j.Generations {
		js := journalStats{Generation: gen, Entries: j.Entries[i], Bytes: j.Bytes[i]}
		if i == 0 {
			js.FoldedThrough = string(j.Folded)
		}
		cs.Journal = append(cs.Journal, js)
		entries += js.Entries
	}
	if entries == 0 && !r.ByValueOwed() {
		return nil
	}
	names, err := r.IndexNames()
	if err != nil {
		return err
	}
	cs.IndexEntries = 0
	for _, name := range names {
		err := r.ForEachIndexEntry(name, func(string, string, []byte, error) error {
			cs.IndexEntries++
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func printStats(out io.Writer, rep statsReport) error {
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	created := "<unknown>"
	if !rep.Created.IsZero() {
		created = rep.Created.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "File:\t%s\n", rep.File)
	fmt.Fprintf(w, "Schema:\t%d\n", rep.Schema)
	fmt.Fprintf(w, "Created:\t%s\n", created)
	fmt.Fprintf(w, "Size on disk:\t%s (%d bytes)\n", humanBytes(rep.FileSize), rep.FileSize)
	fmt.Fprintf(w, "Data:\t%s (%d pages of %d bytes)\n", humanBytes(rep.DataSize), rep.Pages, rep.PageSize)
	fmt.Fprintf(w, "Free pages:\t%d (%s, reused by later writes)\n", rep.FreePages, humanBytes(int64(rep.FreePages*rep.PageSize)))
	fmt.Fprintf(w, "Pending pages:\t%d\n", rep.PendingPages)
	fmt.Fprintf(w, "Last write transaction:\t%d\n", rep.TxID)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "COLLECTION\tOBJECTS\tRECORDS\tINDEX ENTRIES\tPAGES\tALLOCATED\tIN USE\tSHARE")
	for _, c := range rep.Collections {
		share := "0%"
		if rep.DataSize > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(c.Allocated)/float64(rep.DataSize))
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", c.Name, c.Objects, humanBytes(c.RecordBytes), c.IndexEntries,
			c.Pages, humanBytes(int64(c.Allocated)), humanBytes(int64(c.InUse)), share)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := printJournalStats(out, rep); err != nil {
		return err
	}

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "COLLECTION\tBUCKET\tKEYS\tDEPTH\tPAGES\tOVERFLOW\tALLOCATED\tIN USE\tFILL")
	for _, c := range rep.Collections {
		for _, b := range c.Buckets {
			fill := "inline"
			if !b.Inline && b.Allocated > 0 {
				fill = fmt.Sprintf("%.0f%%", 100*float64(b.InUse)/float64(b.Allocated))
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", c.Name, b.Bucket, b.Keys, b.Depth, b.Pages, b.Overflow,
				humanBytes(int64(b.Allocated)), humanBytes(int64(b.InUse)), fill)
		}
	}
	return w.Flush()
}

// printJournalStats prints the journals' generations, if any collection has
// a journal.
func printJournalStats(out io.Writer, rep statsReport) error {
	journaled := false
	for _, c := range rep.Collections {
		journaled = journaled || len(c.Journal) > 0
	}
	if !journaled {
		return nil
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
	fmt.Fprintln(w, "COLLECTION\tJOURNAL GENERATION\tENTRIES\tBYTES\tFOLDED THROUGH")
	for _, c := range rep.Collections {
		for _, j := range c.Journal {
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", c.Name, j.Generation, j.Entries, humanBytes(j.Bytes), orNone(j.FoldedThrough))
		}
	}
	return w.Flush()
}
