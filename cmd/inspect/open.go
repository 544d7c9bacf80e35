package main

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// cacheFile is an open cache file and the collections it holds.
type cacheFile struct {
	path        string
	file        *inspectfile.File
	db          *persist.DB // file's, for decoded reads
	codec       *persist.Codec
	scheme      *runtime.Scheme
	collections []*collection
}

// collection is a stored collection with what its description (or, failing
// that, its first record) says it holds.
type collection struct {
	persist.CollectionInfo

	// Resource is the plural resource name; Group, Version and Kind its API
	// type. Guessed reports that they came from a record, not the
	// description.
	Resource, Group, Version, Kind string
	Guessed                        bool
	// Namespace is the namespace the informer lists, "" for all.
	Namespace string
	// LabelSelector and FieldSelector are the informer's list selectors.
	LabelSelector, FieldSelector string
}

// Description keys that boltinformer's factory writes.
const (
	descResource      = "resource"
	descGroup         = "group"
	descVersion       = "version"
	descKind          = "kind"
	descNamespace     = "namespace"
	descLabelSelector = "labelSelector"
	descFieldSelector = "fieldSelector"
)

// openCache opens path read-only and describes its collections.
func (g *globalOptions) openCache(path string) (*cacheFile, error) {
	if g.lockTimeout <= 0 {
		return nil, usageErrorf("--lock-timeout must be positive, not %s", g.lockTimeout)
	}
	file, err := inspectfile.Open(path, inspectfile.Options{LockTimeout: g.lockTimeout, Scheme: g.scheme})
	if err != nil {
		return nil, openError(path, g.lockTimeout, err)
	}
	f := &cacheFile{path: path, file: file, db: file.DB(), codec: persist.NewCodec(g.scheme), scheme: g.scheme}
	infos, err := f.db.Collections()
	if err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("reading the collections of %s: %w", path, err)
	}
	for _, info := range infos {
		f.collections = append(f.collections, f.describe(info))
	}
	return f, nil
}

func (f *cacheFile) Close() error { return f.file.Close() }

// lockedHelp is what a user needs to know when a live process holds the file.
const lockedHelp = `inspect opens cache files read-only, and bbolt does not let a reader in while
a process holds the file for writing. Inspect a hot snapshot instead: from
inside that process, with the *persist.DB its informers use, call

    err := db.SnapshotFile(ctx, "/tmp/cache-snapshot.db")

(a consistent copy, written while the informers keep running), then run
inspect on the copy. cmd/inspect/README.md ("Inspecting a running
controller") shows a debug HTTP handler that serves such snapshots.
Otherwise stop the process, or raise --lock-timeout if it is about to exit.`

func openError(path string, timeout fmt.Stringer, err error) error {
	switch {
	case errors.Is(err, persist.ErrLocked):
		return fmt.Errorf("%s is held by a running informer (or another process writing it): gave up waiting for its lock after %s.\n%s", path, timeout, lockedHelp)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	}
	return err
}

// describe resolves what a collection holds from its description, or from
// its first record when the description does not say.
func (f *cacheFile) describe(info persist.CollectionInfo) *collection {
	d := info.Description
	c := &collection{
		CollectionInfo: info,
		Resource:       d[descResource],
		Group:          d[descGroup],
		Version:        d[descVersion],
		Kind:           d[descKind],
		Namespace:      d[descNamespace],
		LabelSelector:  d[descLabelSelector],
		FieldSelector:  d[descFieldSelector],
	}
	if c.Kind == "" || c.Version == "" {
		if gvk := f.sampleKind(info.Name); !gvk.Empty() {
			c.Guessed = c.Kind == ""
			if c.Kind == "" {
				c.Kind = gvk.Kind
			}
			if c.Version == "" && (c.Group == "" || c.Group == gvk.Group) {
				c.Group, c.Version = gvk.Group, gvk.Version
			}
		}
	}
	if c.Resource == "" && c.Kind != "" {
		plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: c.Group, Version: c.Version, Kind: c.Kind})
		c.Resource = plural.Resource
		c.Guessed = true
	}
	return c
}

// sampleKind returns the API type of the collection's first record.
func (f *cacheFile) sampleKind(name string) schema.GroupVersionKind {
	var gvk schema.GroupVersionKind
	_ = f.file.View(name, func(r *inspectfile.Collection) error {
		return r.ForEachRecord(func(key string, rec []byte) error {
			if o, err := f.decode(nil, key, rec); err == nil {
				gvk = o.GVK
			}
			return errStop
		})
	})
	return gvk
}

var errStop = errors.New("stop")

// GroupResource returns "resource.group", or "resource" for the core group.
func (c *collection) GroupResource() string {
	if c.Group == "" {
		return c.Resource
	}
	return c.Resource + "." + c.Group
}

// shortNames are kubectl's short names for the built-in resources.
var shortNames = map[string]string{
	"po": "pods", "cm": "configmaps", "deploy": "deployments", "svc": "services",
	"no": "nodes", "ns": "namespaces", "sa": "serviceaccounts", "rs": "replicasets",
	"ds": "daemonsets", "sts": "statefulsets", "ep": "endpoints", "pvc": "persistentvolumeclaims",
	"pv": "persistentvolumes", "ing": "ingresses", "cj": "cronjobs", "ev": "events",
	"hpa": "horizontalpodautoscalers", "pdb": "poddisruptionbudgets", "netpol": "networkpolicies",
	"sc": "storageclasses", "crd": "customresourcedefinitions", "limits": "limitranges",
	"quota": "resourcequotas", "csr": "certificatesigningrequests",
}

// matches reports whether arg names the collection's resource the way
// kubectl accepts it: plural, singular (kind), short name, each optionally
// qualified by group.
func (c *collection) matches(arg string) bool {
	arg = strings.ToLower(arg)
	if full, ok := shortNames[arg]; ok && isBuiltinGroup(c.Group) {
		arg = full
	}
	resource, kind := strings.ToLower(c.Resource), strings.ToLower(c.Kind)
	names := []string{resource, kind}
	for _, n := range names {
		if n == "" {
			continue
		}
		if arg == n || c.Group != "" && arg == n+"."+strings.ToLower(c.Group) {
			return true
		}
	}
	return false
}

func isBuiltinGroup(group string) bool {
	return !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// resolve finds the collection named by arg: a collection name first, then
// a resource held by exactly one collection.
func (f *cacheFile) resolve(arg string) (*collection, error) {
	for _, c := range f.collections {
		if c.Name == arg {
			return c, nil
		}
	}
	var found []*collection
	for _, c := range f.collections {
		if c.matches(arg) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no collection of %s is named %q or holds %q; its collections: %s", f.path, arg, arg, f.collectionList())
	}
	var names []string
	for _, c := range found {
		names = append(names, fmt.Sprintf("%s (%s)", c.Name, c.scope()))
	}
	return nil, fmt.Errorf("%q is held by %d collections of %s: %s; name the collection instead", arg, len(found), f.path, strings.Join(names, ", "))
}

// resolveAll resolves every argument, or returns every collection if there
// are none.
func (f *cacheFile) resolveAll(args []string) ([]*collection, error) {
	if len(args) == 0 {
		return f.collections, nil
	}
	var out []*collection
	seen := map[string]bool{}
	for _, a := range args {
		c, err := f.resolve(a)
		if err != nil {
			return nil, err
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *cacheFile) collectionList() string {
	if len(f.collections) == 0 {
		return "(no collections)"
	}
	var names []string
	for _, c := range f.collections {
		if c.Resource != "" && c.Resource != c.Name {
			names = append(names, fmt.Sprintf("%s (%s)", c.Name, c.GroupResource()))
		} else {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

// scope describes what the collection lists: "pods in storefront, labels app=x".
func (c *collection) scope() string {
	s := c.GroupResource()
	if s == "" {
		s = "<unknown resource>"
	}
	if c.Namespace != "" {
		s += " in " + c.Namespace
	} else {
		s += " in all namespaces"
	}
	if sel := c.selectors(); sel != "" {
		s += ", " + sel
	}
	return s
}

// selectors renders the list selectors: "labels:app=x fields:spec.nodeName=n".
func (c *collection) selectors() string {
	var parts []string
	if c.LabelSelector != "" {
		parts = append(parts, "labels:"+c.LabelSelector)
	}
	if c.FieldSelector != "" {
		parts = append(parts, "fields:"+c.FieldSelector)
	}
	return strings.Join(parts, " ")
}

// indexNames returns the collection's index names, sorted.
func (c *collection) indexNames() []string {
	names := make([]string, 0, len(c.Indexes))
	for n := range c.Indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// completeCollections offers collection and resource names for shell
// completion, read from the file named by --file.
func (g *globalOptions) completeCollections() []string {
	if g.file == "" {
		return nil
	}
	f, err := g.openCache(g.file)
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	for _, c := range f.collections {
		for _, n := range []string{c.Name, c.Resource} {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// completeCollectionFirst completes a command whose first argument names a
// collection (or resource) and whose later ones cannot be completed.
func (g *globalOptions) completeCollectionFirst(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return g.completeCollections(), cobra.ShellCompDirectiveNoFileComp
}

// plural returns "1 object", "2 objects", "3 entries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
