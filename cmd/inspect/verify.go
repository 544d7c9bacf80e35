package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

type verifyOptions struct {
	g *globalOptions

	file string
}

func (o *verifyOptions) AddFlags(*pflag.FlagSet) {}

func newVerifyCommand(g *globalOptions) *cobra.Command {
	o := &verifyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "verify [FILE]",
		Short: "Check the file's consistency: pages, records and indexes",
		Long: `Check a cache file and report every problem found:

  1. bbolt's consistency check (tx.Check): every page reachable or free, none
     twice, keys ordered;
  2. every record decodes, and its header's resourceVersion is its object's;
  3. every index holds exactly the indexes the collection lists, and for each
     index, every value→key entry names a stored object whose key→values
     entry lists that value, and every key→values entry names a stored
     object and is matched by value→key entries.

Records and indexes are checked as the collection's state: its trees with
its journal (changes committed but not yet folded into them) applied. A
journal entry that does not decode is a problem, and leaves the rest of its
collection unchecked.

Index functions are code and are not in the file, so verify cannot recompute
an index from the objects: it checks that the index agrees with itself and
with the stored keys, not that it still matches its function (an index is
rebuilt when its declared version changes; see persist.CollectionOptions).

Problems are printed one per line, naming the collection, key, index and
value at fault, and make verify exit 1. Records of types inspect's scheme does
not know are reported as warnings. Progress goes to stderr on a terminal.`,
		Example: `  inspect verify cache.db
  inspect verify -f cache.db || echo "cache file damaged: move it aside, the informer will start cold"`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *verifyOptions) Complete(args []string) error {
	var err error
	o.file, err = o.g.fileArg(args)
	return err
}

func (o *verifyOptions) Validate() error { return nil }

// verifier accumulates a verify run's findings.
type verifier struct {
	f        *cacheFile
	out      io.Writer
	progress *progress

	problems, warnings int
	records, entries   int
}

func (v *verifier) problem(format string, args ...any) {
	v.problems++
	fmt.Fprintf(v.out, "PROBLEM "+format+"\n", args...)
}

func (v *verifier) warning(format string, args ...any) {
	v.warnings++
	fmt.Fprintf(v.out, "WARNING "+format+"\n", args...)
}

func (o *verifyOptions) Run(out, errOut io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	total := 0
	for _, c := range f.collections {
		total += c.Objects
	}
	v := &verifier{f: f, out: out, progress: newProgress(errOut, "verify", total)}

	if err := v.checkBolt(); err != nil {
		return err
	}
	for _, c := range f.collections {
		if err := v.checkCollection(c); err != nil {
			v.progress.finish()
			return fmt.Errorf("verifying collection %q: %w", c.Name, err)
		}
	}
	v.progress.finish()

	summary := strings.Join([]string{plural(len(f.collections), "collection"), plural(v.records, "record"), plural(v.entries, "index entry")}, ", ")
	if v.warnings > 0 {
		summary += ", " + plural(v.warnings, "warning")
	}
	if v.problems > 0 {
		fmt.Fprintf(out, "FAILED: %s in %s.\n", plural(v.problems, "problem"), summary)
		return &exitError{code: 1, err: fmt.Errorf("%s: verify found %s", f.path, plural(v.problems, "problem"))}
	}
	fmt.Fprintf(out, "OK: %s; no problems found.\n", summary)
	return nil
}

// checkBolt runs bbolt's page-level consistency check.
func (v *verifier) checkBolt() error {
	n := 0
	err := v.f.file.Check(func(err error) {
		n++
		v.problem("bbolt: %v", err)
	})
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(v.out, "bbolt: pages consistent (tx.Check)")
	}
	return nil
}

func (v *verifier) checkCollection(c *collection) error {
	before := v.problems
	var notes []string
	err := v.f.file.View(c.Name, func(r *inspectfile.Collection) error {
		j, err := r.Journal()
		if err != nil {
			v.problem("%v", err) // names the collection and its journal
			notes = append(notes, "journal unreadable, nothing else checked")
			return nil
		}
		records, err := v.checkRecords(c, r)
		if err != nil {
			return err
		}
		notes = append(notes, plural(records, "record"))
		if n := sum(j.Entries); n > 0 {
			notes = append(notes, "journal: "+plural(n, "entry")+" applied")
		}
		onDisk, err := r.IndexNames()
		if err != nil {
			v.problem("collection %q: %v", c.Name, err)
			return nil
		}
		stored := map[string]bool{}
		for _, name := range onDisk {
			stored[name] = true
			if _, ok := c.Indexes[name]; !ok {
				v.problem("collection %q index %q: bucket present but the collection does not list the index (a leftover no open will clean up)", c.Name, name)
			}
		}
		for _, name := range c.indexNames() {
			if !stored[name] {
				v.problem("collection %q index %q: listed (version %q) but its bucket is missing", c.Name, name, c.Indexes[name])
				continue
			}
			entries, err := v.checkIndex(c, r, name)
			if err != nil {
				return err
			}
			notes = append(notes, fmt.Sprintf("index %s: %s", name, plural(entries, "entry")))
		}
		return nil
	})
	if err != nil {
		return err
	}
	status := "ok"
	if n := v.problems - before; n > 0 {
		status = plural(n, "problem")
	}
	fmt.Fprintf(v.out, "collection %s: %s; %s\n", c.Name, strings.Join(notes, "; "), status)
	return nil
}

// checkRecords decodes every record of the collection.
func (v *verifier) checkRecords(c *collection, r *inspectfile.Collection) (int, error) {
	n := 0
	err := v.f.decodeRecords(c, r.ForEachRecord, nil, func(key string, rec []byte, o *object, err error) error {
		n++
		v.records++
		v.progress.add(1)
		h, _, herr := format.ReadHeader(rec)
		switch {
		case herr != nil:
			v.problem("collection %q key %q: record does not decode (%d bytes): %v", c.Name, key, len(rec), herr)
		case errors.Is(err, persist.ErrUnknownType):
			v.warning("collection %q key %q: type %s is not in inspect's scheme; its %s payload was not decoded", c.Name, key, h.Type, h.Encoding)
		case err != nil:
			v.problem("collection %q key %q: %s payload does not decode: %v", c.Name, key, h.Encoding, err)
		case o.Meta != nil && o.Meta.GetResourceVersion() != h.ResourceVersion:
			v.problem("collection %q key %q: record header says resourceVersion %q, object says %q", c.Name, key, h.ResourceVersion, o.Meta.GetResourceVersion())
		}
		return nil
	})
	return n, err
}

// checkIndex checks an index's value→key entries against its key→values
// entries and the stored objects, both ways.
func (v *verifier) checkIndex(c *collection, r *inspectfile.Collection, index string) (int, error) {
	where := fmt.Sprintf("collection %q index %q", c.Name, index)
	n := 0
	err := r.ForEachIndexEntry(index, func(value, key string, raw []byte, err error) error {
		n++
		v.entries++
		if err != nil {
			v.problem("%s: value→key entry %q does not parse: %v", where, raw, err)
			return nil
		}
		rec, err := r.Record(key)
		if err != nil {
			return err
		}
		if rec == nil {
			v.problem("%s: value %q → key %q, but no object is stored under %q", where, value, key, key)
		}
		values, ok, err := r.IndexedValues(index, key)
		switch {
		case err != nil:
			v.problem("%s: value %q → key %q, but the key→values entry of %q does not decode: %v", where, value, key, key, err)
		case !ok:
			v.problem("%s: value %q → key %q, but %q has no key→values entry", where, value, key, key)
		case !contains(values, value):
			v.problem("%s: value %q → key %q, but the key→values entry of %q is %q", where, value, key, key, values)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	err = r.ForEachIndexedKey(index, func(key string, values []string, err error) error {
		if err != nil {
			v.problem("%s: key→values entry of %q does not decode: %v", where, key, err)
			return nil
		}
		rec, err := r.Record(key)
		if err != nil {
			return err
		}
		if rec == nil {
			v.problem("%s: key→values entry for %q, but no object is stored under it", where, key)
		}
		if len(values) == 0 {
			v.problem("%s: key→values entry of %q is empty", where, key)
		}
		for _, value := range values {
			ok, err := r.HasIndexEntry(index, value, key)
			if err != nil {
				return err
			}
			if !ok {
				v.problem("%s: key %q lists value %q, but there is no value %q → key %q entry", where, key, value, value, key)
			}
		}
		return nil
	})
	return n, err
}

func sum(counts []int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
