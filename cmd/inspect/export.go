package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

type exportOptions struct {
	g *globalOptions

	dir              string
	keepServerFields bool
	namespace        string
	selector         string

	// Filled by Complete.
	file        string
	collections []string
	sel         labels.Selector
}

func (o *exportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.dir, "dir", "d", "", "Write one YAML file per object under this directory (created; must be empty) instead of one List to stdout.")
	fs.BoolVar(&o.keepServerFields, "keep-server-fields", false, "Keep uid, resourceVersion, generation, creationTimestamp, managedFields and the other fields the apiserver sets (the output is then a faithful copy, but kubectl apply refuses it).")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "Only objects of this namespace (and cluster-scoped ones).")
	fs.StringVarP(&o.selector, "selector", "l", "", "Only objects whose labels match this selector.")
}

func newExportCommand(g *globalOptions) *cobra.Command {
	o := &exportOptions{g: g}
	cmd := &cobra.Command{
		Use:   "export [RESOURCE|COLLECTION...] -f FILE",
		Short: "Write objects as YAML: one kubectl-appliable List, or a directory of files",
		Long: `Write the objects of the named collections (all of them by default) as YAML.

Without --dir, one v1 List goes to stdout, which kubectl apply -f accepts.
With --dir, each object goes to DIR/<collection>/<namespace>/<name>.yaml
(DIR/<collection>/<name>.yaml for cluster-scoped objects), for
kubectl apply -R -f DIR or for grep and diff.

apiVersion and kind are filled in from the record and the collection's
description where the stored object has none (typed informers store objects
without them). Fields the apiserver sets (uid, resourceVersion, generation,
creationTimestamp, managedFields, deletion fields) are dropped so that the
output applies; --keep-server-fields keeps them. status is kept.

Secret data is redacted unless --show-secrets; redacted Secrets do not apply.
Progress goes to stderr on a terminal.`,
		Example: `  # Everything, as one List
  inspect export -f cache.db > cache.yaml

  # Deployments of one namespace, into a directory
  inspect export deployments.apps -f cache.db -n storefront -d ./export

  # A faithful copy, secrets included (handle the output as a secret)
  inspect export -f cache.db --keep-server-fields --show-secrets > full.yaml`,
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.completeCollections(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *exportOptions) Complete(args []string) error {
	var err error
	if o.file, err = o.g.fileArg(nil); err != nil {
		return err
	}
	o.collections = args
	if o.sel, err = labels.Parse(o.selector); err != nil {
		return usageErrorf("invalid selector %q: %v", o.selector, err)
	}
	return nil
}

func (o *exportOptions) Validate() error {
	if o.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(o.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("export directory %s is not empty; give a new or empty directory", o.dir)
	}
	return nil
}

func (o *exportOptions) Run(out, errOut io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	colls, err := f.resolveAll(o.collections)
	if err != nil {
		return err
	}
	total := 0
	for _, c := range colls {
		total += c.Objects
	}
	prog := newProgress(errOut, "export", total)
	copts := contentOptions{showSecrets: o.g.showSecrets, stripServerFields: !o.keepServerFields}

	var p printer
	if o.dir == "" {
		// Plain YAML: export decides itself which server fields to keep.
		flags := &objectPrintFlags{}
		flags.output, flags.showManagedFields = outputYAML, true
		if err := flags.validate(); err != nil {
			return err
		}
		if p, err = f.newPrinter(out, printOptions{flags: flags, content: copts}); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	exported, secrets := 0, 0
	for _, c := range colls {
		_, bad, err := f.scan(c, scanOptions{namespace: o.namespace, selector: o.sel, progress: prog}, func(obj *object) error {
			exported++
			if isSecret(obj.GVK) {
				secrets++
			}
			if p != nil {
				return p.print(obj)
			}
			return o.writeFile(c, obj, copts)
		})
		if err != nil {
			prog.finish()
			return err
		}
		warnUndecodable(errOut, c, bad)
	}
	prog.finish()
	if p != nil {
		if err := p.flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "exported %d objects of %d collections to %s\n", exported, len(colls), o.dir)
	}
	if secrets > 0 && !o.g.showSecrets {
		fmt.Fprintf(errOut, "Warning: the data of %d Secret(s) is redacted and will not apply; pass --show-secrets to export it (and keep the output as secret as the cluster's).\n", secrets)
	}
	return nil
}

// writeFile writes one object to DIR/<collection>/[<namespace>/]<name>.yaml.
func (o *exportOptions) writeFile(c *collection, obj *object, copts contentOptions) error {
	m, err := obj.content(copts)
	if err != nil {
		return err
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.dir, safeName(c.Name))
	if ns := obj.Namespace(); ns != "" {
		dir = filepath.Join(dir, safeName(ns))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, safeName(obj.Name())+".yaml")
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("exporting %q of collection %q: %w", obj.Key, c.Name, err)
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// safeName makes s usable as one path element.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
	if s == "" || strings.HasPrefix(s, ".") {
		s = "_" + s
	}
	return s
}
