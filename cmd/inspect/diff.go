package main

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

type diffOptions struct {
	g    *globalOptions
	show bool

	// Filled by Complete.
	fileA, fileB string
	collections  []string
}

func (o *diffOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.show, "show", false, "Show a unified diff of the YAML of each changed object (Secret values stay redacted unless --show-secrets).")
}

func newDiffCommand(g *globalOptions) *cobra.Command {
	o := &diffOptions{g: g}
	cmd := &cobra.Command{
		Use:   "diff FILE_A FILE_B [RESOURCE|COLLECTION...]",
		Short: "Show the keys added, removed and changed between two cache files",
		Long: `Compare two cache files (say, snapshots taken before and after an incident)
collection by collection: the objects only in FILE_B (+), only in FILE_A (-)
and changed (~), with --show a unified diff of each changed object's YAML.

An object is changed when its content differs; one that was only re-encoded
is not. Collections are matched by name. diff exits 0 when the files hold the
same objects, 1 when they differ and 2 on an error, like diff(1) and kubectl
diff.`,
		Example: `  inspect diff before.db after.db
  inspect diff before.db after.db pods --show`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return &exitError{code: 2, err: err}
			}
			if err := o.Validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
			return o.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *diffOptions) Complete(args []string) error {
	if o.g.file != "" {
		return usageErrorf("diff takes its two files as arguments, not --file")
	}
	o.fileA, o.fileB, o.collections = args[0], args[1], args[2:]
	return nil
}

func (o *diffOptions) Validate() error { return nil }

// keyChange is one key's difference.
type keyChange struct {
	key    string
	op     byte // '+', '-' or '~'
	fields []string
}

func (o *diffOptions) Run(out, _ io.Writer) error {
	a, err := o.g.openCache(o.fileA)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer a.Close()
	b, err := o.g.openCache(o.fileB)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer b.Close()

	names, err := o.collectionNames(a, b)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	fmt.Fprintf(out, "--- %s\n+++ %s\n", a.path, b.path)
	differ := false
	for _, name := range names {
		ca, cb := a.collection(name), b.collection(name)
		switch {
		case cb == nil:
			differ = true
			fmt.Fprintf(out, "collection %s: only in %s (%s)\n", name, a.path, plural(ca.Objects, "object"))
			continue
		case ca == nil:
			differ = true
			fmt.Fprintf(out, "collection %s: only in %s (%s)\n", name, b.path, plural(cb.Objects, "object"))
			continue
		}
		changes, unchanged, err := o.diffCollection(a, b, ca, cb)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("collection %q: %w", name, err)}
		}
		rv := "resourceVersion " + orNone(ca.ResourceVersion)
		if ca.ResourceVersion != cb.ResourceVersion {
			rv += " -> " + orNone(cb.ResourceVersion)
		}
		if len(changes) == 0 {
			fmt.Fprintf(out, "collection %s: %s; no changes (%s)\n", name, rv, plural(unchanged, "object"))
			continue
		}
		differ = true
		var added, removed, changed int
		for _, c := range changes {
			switch c.op {
			case '+':
				added++
			case '-':
				removed++
			default:
				changed++
			}
		}
		fmt.Fprintf(out, "collection %s: %s; %d added, %d removed, %d changed, %d unchanged\n", name, rv, added, removed, changed, unchanged)
		for _, c := range changes {
			fmt.Fprintf(out, "  %c %s\n", c.op, c.key)
			for _, line := range c.fields {
				fmt.Fprintf(out, "      %s\n", line)
			}
		}
	}
	if differ {
		return &exitError{code: 1}
	}
	return nil
}

func (f *cacheFile) collection(name string) *collection {
	for _, c := range f.collections {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// collectionNames returns the collections to compare: the named ones
// (resolved in either file), or all of both files.
func (o *diffOptions) collectionNames(a, b *cacheFile) ([]string, error) {
	set := map[string]bool{}
	if len(o.collections) == 0 {
		for _, f := range []*cacheFile{a, b} {
			for _, c := range f.collections {
				set[c.Name] = true
			}
		}
	}
	for _, arg := range o.collections {
		c, err := a.resolve(arg)
		if err != nil {
			var errB error
			if c, errB = b.resolve(arg); errB != nil {
				return nil, err
			}
		}
		set[c.Name] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// diffCollection compares one collection of both files: records with equal
// bytes are unchanged; others are decoded and compared by content. It reads
// both files in step, holding nothing but the changes in memory.
func (o *diffOptions) diffCollection(a, b *cacheFile, ca, cb *collection) ([]keyChange, int, error) {
	var changes []keyChange
	unchanged := 0
	err := a.file.View(ca.Name, func(ra *inspectfile.Collection) error {
		return b.file.View(cb.Name, func(rb *inspectfile.Collection) error {
			err := rb.ForEachRecord(func(key string, recB []byte) error {
				recA, err := ra.Record(key)
				if err != nil {
					return err
				}
				switch {
				case recA == nil:
					changes = append(changes, keyChange{key: key, op: '+'})
				case bytes.Equal(recA, recB):
					unchanged++
				default:
					fields, same, err := o.compare(a, b, ca, cb, key, recA, recB)
					if err != nil {
						return err
					}
					if same {
						unchanged++
					} else {
						changes = append(changes, keyChange{key: key, op: '~', fields: fields})
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			return ra.ForEachRecord(func(key string, _ []byte) error {
				recB, err := rb.Record(key)
				if err == nil && recB == nil {
					changes = append(changes, keyChange{key: key, op: '-'})
				}
				return err
			})
		})
	})
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].key < changes[j].key })
	return changes, unchanged, err
}

// compare decodes one key's records from both files and returns whether
// their contents are equal and, with --show, a unified diff of their YAML.
// YAML, as kubectl diff shows objects: an inserted list element (a
// container, say) is a few added lines, not every later element changed.
func (o *diffOptions) compare(a, b *cacheFile, ca, cb *collection, key string, recA, recB []byte) ([]string, bool, error) {
	objA, err := a.decode(ca, key, recA)
	if err != nil {
		return []string{fmt.Sprintf("(cannot decode %s's record: %v)", a.path, err)}, false, nil
	}
	objB, err := b.decode(cb, key, recB)
	if err != nil {
		return []string{fmt.Sprintf("(cannot decode %s's record: %v)", b.path, err)}, false, nil
	}
	mA, err := objA.rawContent()
	if err != nil {
		return nil, false, err
	}
	mB, err := objB.rawContent()
	if err != nil {
		return nil, false, err
	}
	if reflect.DeepEqual(mA, mB) {
		return nil, true, nil
	}
	if !o.show {
		return nil, false, nil
	}
	hiddenChange := false
	if !o.g.showSecrets && (isSecret(objA.GVK) || isSecret(objB.GVK)) {
		rawDiffer := !reflect.DeepEqual(secretValues(mA), secretValues(mB))
		redactSecret(mA)
		redactSecret(mB)
		hiddenChange = rawDiffer && reflect.DeepEqual(secretValues(mA), secretValues(mB))
	}
	yA, err := yaml.Marshal(mA)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", key, err)
	}
	yB, err := yaml.Marshal(mB)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", key, err)
	}
	// No file names: the header of diff's output names both files.
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:       difflib.SplitLines(strings.TrimSuffix(string(yA), "\n")),
		B:       difflib.SplitLines(strings.TrimSuffix(string(yB), "\n")),
		Context: 3,
	})
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", key, err)
	}
	var lines []string
	if text != "" {
		lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	if hiddenChange {
		lines = append(lines, "(redacted Secret values differ, with the same sizes; --show-secrets shows them)")
	}
	return lines, false, nil
}

// secretValues returns what redactSecret redacts in m, for comparison.
func secretValues(m map[string]any) []any {
	var annotation any
	if md, ok := m["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			annotation = ann[lastApplied]
		}
	}
	return []any{m["data"], m["stringData"], annotation}
}
