package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
)

type getOptions struct {
	g *globalOptions

	namespace     string
	allNamespaces bool
	selector      string
	print         *objectPrintFlags

	// Filled by Complete.
	file     string
	resource string
	names    []string
	sel      labels.Selector
}

func (o *getOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.namespace, "namespace", "n", "", "Only objects of this namespace (and cluster-scoped ones).")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Objects of all namespaces (the default: a cache file has no current namespace). Overrides -n.")
	fs.StringVarP(&o.selector, "selector", "l", "", "Label selector to filter on, as kubectl's (e.g. -l 'app=api,tier!=cache').")
}

func newGetCommand(g *globalOptions) *cobra.Command {
	o := &getOptions{g: g, print: &objectPrintFlags{}}
	cmd := &cobra.Command{
		Use:   "get RESOURCE|COLLECTION [NAME...] -f FILE",
		Short: "Print the objects of a collection, as kubectl get would",
		Long: `Print the objects of a collection, as kubectl get would.

RESOURCE is a collection name, or a resource (plural, singular, short name,
optionally .group: pods, pod, po, deployments.apps) held by exactly one
collection according to its description. Output goes through kubectl's
printers (k8s.io/cli-runtime): tables are kubectl's for Pods, ConfigMaps,
Secrets, Deployments and Nodes, and NAME/AGE for other kinds; -o jsonpath=
and -o go-template= see the object of get TYPE NAME, otherwise a v1 List.

Without -n, objects of every namespace are printed: a cache file has no
current namespace. AGE is computed against the local clock.`,
		Example: `  # All pods the controller cached
  inspect get pods -f cache.db

  # One namespace, with IPs and nodes
  inspect get pods -f cache.db -n storefront -o wide

  # By label, as YAML
  inspect get deployments.apps -f cache.db -l app.kubernetes.io/name=checkout-api -o yaml

  # One object, as JSON (Secrets are redacted unless --show-secrets)
  inspect get secrets -f cache.db -n storefront checkout-db -o json

  # One field of each object, as kubectl's JSONPath or Go templates
  inspect get pods -f cache.db -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.spec.nodeName}{"\n"}{end}'
  inspect get pods -f cache.db -o go-template='{{range .items}}{{.status.podIP}}{{"\n"}}{{end}}'`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: g.completeCollectionFirst,
		RunE:              runE(o),
	}
	o.AddFlags(cmd.Flags())
	o.print.AddFlags(cmd.Flags())
	return cmd
}

func (o *getOptions) Complete(args []string) error {
	var err error
	if o.file, err = o.g.fileArg(nil); err != nil {
		return err
	}
	o.resource, o.names = args[0], args[1:]
	if o.allNamespaces {
		o.namespace = ""
	}
	if o.sel, err = labels.Parse(o.selector); err != nil {
		return usageErrorf("invalid selector %q: %v", o.selector, err)
	}
	return nil
}

func (o *getOptions) Validate() error {
	if strings.Contains(o.resource, ",") {
		return usageErrorf("one resource at a time: %q", o.resource)
	}
	return o.print.validate()
}

func (o *getOptions) Run(out, errOut io.Writer) error {
	f, err := o.g.openCache(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := f.resolve(o.resource)
	if err != nil {
		return err
	}
	p, err := f.newPrinter(out, printOptions{
		flags:         o.print,
		allNamespaces: o.namespace == "",
		single:        len(o.names) == 1,
		content:       contentOptions{showSecrets: o.g.showSecrets},
		now:           o.g.now(),
	})
	if err != nil {
		return err
	}
	found := map[string]bool{}
	n, bad, err := f.scan(c, scanOptions{namespace: o.namespace, names: o.names, selector: o.sel}, func(obj *object) error {
		found[obj.Name()] = true
		return p.print(obj)
	})
	if err != nil {
		return err
	}
	warnUndecodable(errOut, c, bad)
	if n == 0 && len(o.names) == 0 && o.print.isTable() {
		if o.namespace != "" {
			fmt.Fprintf(errOut, "No resources found in %s namespace.\n", o.namespace)
		} else {
			fmt.Fprintln(errOut, "No resources found")
		}
		return nil
	}
	if n > 0 || len(o.names) == 0 {
		if err := p.flush(); err != nil {
			return err
		}
	}
	var missing []error
	for _, name := range o.names {
		if !found[name] {
			where := ""
			if o.namespace != "" {
				where = fmt.Sprintf(" in namespace %q", o.namespace)
			}
			missing = append(missing, fmt.Errorf("%s %q not found%s (collection %q)", c.GroupResource(), name, where, c.Name))
		}
	}
	return errors.Join(missing...)
}
