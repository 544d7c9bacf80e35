package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// Output formats of get and index besides jsonpath and go-template.
const (
	outputTable = ""
	outputWide  = "wide"
	outputYAML  = "yaml"
	outputJSON  = "json"
	outputName  = "name"
)

// templateFormats are kubectl's -o FORMAT=TEMPLATE formats.
var templateFormats = []string{"jsonpath", "jsonpath-as-json", "jsonpath-file", "go-template", "go-template-file"}

// objectPrintFlags are the output flags of the commands that print objects
// (get, index), as kubectl get has them: -o, --show-managed-fields, and
// --show-labels and --no-headers for tables. (cli-runtime's
// genericclioptions.PrintFlags would bring in kustomize and the REST client
// configuration with it; the printers package is all inspect needs.)
type objectPrintFlags struct {
	output            string
	showLabels        bool
	noHeaders         bool
	showManagedFields bool

	// Set by validate.
	kind, template string
}

func (f *objectPrintFlags) AddFlags(fs *pflag.FlagSet, extra ...string) {
	formats := append([]string{"table", outputWide, outputJSON, outputYAML, outputName}, templateFormats...)
	fs.StringVarP(&f.output, "output", "o", f.output, fmt.Sprintf("Output format. One of: (%s). Templates take their argument as -o jsonpath='{.items[*].metadata.name}'.", strings.Join(append(formats, extra...), ", ")))
	fs.BoolVar(&f.showLabels, "show-labels", false, "When printing a table, show all labels as the last column.")
	fs.BoolVar(&f.noHeaders, "no-headers", false, "When printing a table, don't print headers.")
	fs.BoolVar(&f.showManagedFields, "show-managed-fields", false, "If true, keep the managedFields when printing objects in JSON or YAML format.")
}

// isTable reports whether the output is a table.
func (f *objectPrintFlags) isTable() bool {
	return f.kind == outputTable || f.kind == outputWide
}

// validate splits -o into its format and template, and parses the template,
// so that a bad one is a usage error before the file is opened.
func (f *objectPrintFlags) validate() error {
	f.kind, f.template = f.output, ""
	if f.kind == "table" {
		f.kind = outputTable
	}
	for _, t := range templateFormats {
		if tmpl, ok := strings.CutPrefix(f.output, t+"="); ok {
			f.kind, f.template = t, tmpl
		}
	}
	switch f.kind {
	case outputTable, outputWide, outputJSON, outputYAML, outputName:
		return nil
	}
	if !slices.Contains(templateFormats, f.kind) {
		return usageErrorf("unsupported output format %q: allowed are table, wide, json, yaml, name, %s (as FORMAT=TEMPLATE)", f.output, strings.Join(templateFormats, ", "))
	}
	if f.template == "" {
		return usageErrorf("-o %s needs a template: -o %s=TEMPLATE", f.kind, f.kind)
	}
	if strings.HasSuffix(f.kind, "-file") {
		data, err := os.ReadFile(f.template)
		if err != nil {
			return usageErrorf("reading the template of -o %s: %v", f.kind, err)
		}
		f.kind, f.template = strings.TrimSuffix(f.kind, "-file"), string(data)
	}
	if _, err := f.toPrinter(); err != nil {
		return usageError{err}
	}
	return nil
}

// toPrinter returns cli-runtime's printer for a validated non-table format.
func (f *objectPrintFlags) toPrinter() (printers.ResourcePrinter, error) {
	switch f.kind {
	case outputJSON, outputYAML:
		var p printers.ResourcePrinter = &printers.JSONPrinter{}
		if f.kind == outputYAML {
			p = &printers.YAMLPrinter{}
		}
		if !f.showManagedFields {
			p = &printers.OmitManagedFieldsPrinter{Delegate: p}
		}
		return p, nil
	case outputName:
		return &printers.NamePrinter{}, nil
	case "jsonpath", "jsonpath-as-json":
		p, err := printers.NewJSONPathPrinter(f.template)
		if err != nil {
			return nil, fmt.Errorf("error parsing jsonpath %s: %w", f.template, err)
		}
		p.AllowMissingKeys(true)
		p.EnableJSONOutput(f.kind == "jsonpath-as-json")
		return p, nil
	case "go-template":
		p, err := printers.NewGoTemplatePrinter([]byte(f.template))
		if err != nil {
			return nil, fmt.Errorf("error parsing template %s: %w", f.template, err)
		}
		p.AllowMissingKeys(true)
		return p, nil
	}
	return nil, fmt.Errorf("no printer for output format %q", f.kind)
}

// printOptions say how objects are printed.
type printOptions struct {
	flags *objectPrintFlags
	// allNamespaces adds a NAMESPACE column to tables of namespaced objects.
	allNamespaces bool
	// single prints one object as itself rather than as a List (kubectl get
	// TYPE NAME).
	single  bool
	content contentOptions
	now     time.Time
}

// printer prints objects one at a time; flush ends the output.
type printer interface {
	print(o *object) error
	flush() error
}

// newPrinter returns the printer for opts.flags, validated beforehand.
func (f *cacheFile) newPrinter(out io.Writer, opts printOptions) (printer, error) {
	fl := opts.flags
	if fl.isTable() {
		return &tablePrinter{f: f, out: out, opts: opts, groups: map[schema.GroupKind]*tableGroup{}}, nil
	}
	switch fl.kind {
	case outputJSON, outputYAML:
		// The List is streamed item by item: each item is printed by a
		// fresh printer (a YAMLPrinter separates its second object with
		// "---") and indented into place.
		return &listPrinter{out: out, json: fl.kind == outputJSON, single: opts.single, opts: opts.content, newPrinter: fl.toPrinter}, nil
	}
	p, err := fl.toPrinter()
	if err != nil {
		return nil, err
	}
	if fl.kind == outputName {
		return &namePrinter{out: out, p: p}, nil
	}
	// Templates see the whole List at once, as in kubectl (and hold it in
	// memory, as kubectl does).
	return &templatePrinter{out: out, p: p, single: opts.single, opts: opts.content}, nil
}

// namePrinter prints kind/name for every object (-o name). It hands the
// printer only the type and name, so no object is converted to JSON.
type namePrinter struct {
	out io.Writer
	p   printers.ResourcePrinter
}

func (p *namePrinter) print(o *object) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GVK)
	u.SetName(o.Name())
	return p.p.PrintObj(u, p.out)
}

func (*namePrinter) flush() error { return nil }

// templatePrinter collects the objects into a v1 List (or keeps the one
// object of get TYPE NAME) and runs the template once on it.
type templatePrinter struct {
	out    io.Writer
	p      printers.ResourcePrinter
	single bool
	opts   contentOptions
	items  []any
}

func (p *templatePrinter) print(o *object) error {
	m, err := o.content(p.opts)
	if err != nil {
		return err
	}
	p.items = append(p.items, m)
	return nil
}

func (p *templatePrinter) flush() error {
	if p.single && len(p.items) == 1 {
		return p.p.PrintObj(&unstructured.Unstructured{Object: p.items[0].(map[string]any)}, p.out)
	}
	items := p.items
	if items == nil {
		items = []any{}
	}
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]any{"resourceVersion": ""},
	}
	return p.p.PrintObj(&unstructured.Unstructured{Object: list}, p.out)
}

// tablePrinter collects rows per kind and prints one table per kind, in
// order of first appearance, through cli-runtime's table printer (which
// aligns columns, hides -o wide columns, and adds NAMESPACE and LABELS).
type tablePrinter struct {
	f      *cacheFile
	out    io.Writer
	opts   printOptions
	order  []schema.GroupKind
	groups map[schema.GroupKind]*tableGroup
}

type tableGroup struct {
	table metav1.Table
	// namespaced is true when any of its objects has a namespace.
	namespaced bool
}

func (p *tablePrinter) print(o *object) error {
	def, obj := p.f.tableFor(o)
	gk := o.GVK.GroupKind()
	g := p.groups[gk]
	if g == nil {
		g = &tableGroup{table: metav1.Table{ColumnDefinitions: def.columns}}
		p.groups[gk] = g
		p.order = append(p.order, gk)
	}
	// Every cell, -o wide ones included, as the apiserver's table
	// convertor makes them: the printer hides the wide columns, and
	// appends LABELS after the last column definition.
	g.table.Rows = append(g.table.Rows, def.row(obj, p.opts.now, true))
	g.namespaced = g.namespaced || o.Namespace() != ""
	return nil
}

func (p *tablePrinter) flush() error {
	for i, gk := range p.order {
		g := p.groups[gk]
		if i > 0 {
			fmt.Fprintln(p.out)
		}
		tp := printers.NewTablePrinter(printers.PrintOptions{
			NoHeaders:     p.opts.flags.noHeaders,
			WithNamespace: p.opts.allNamespaces && g.namespaced,
			Wide:          p.opts.flags.kind == outputWide,
			ShowLabels:    p.opts.flags.showLabels,
			WithKind:      len(p.order) > 1,
			Kind:          gk,
		})
		if err := tp.PrintObj(&g.table, p.out); err != nil {
			return err
		}
	}
	return nil
}

// listPrinter prints objects as YAML or JSON: a v1 List, as kubectl does,
// or a single object. Items are written as they come, so a large List is
// never held in memory.
type listPrinter struct {
	out        io.Writer
	json       bool
	single     bool
	opts       contentOptions
	newPrinter func() (printers.ResourcePrinter, error)

	n     int
	first map[string]any // held until a second object (or flush) decides the shape
}

func (p *listPrinter) print(o *object) error {
	m, err := o.content(p.opts)
	if err != nil {
		return err
	}
	p.n++
	switch p.n {
	case 1:
		p.first = m
		return nil
	case 2:
		if err := p.start(); err != nil {
			return err
		}
		if err := p.item(p.first, true); err != nil {
			return err
		}
		p.first = nil
	}
	return p.item(m, false)
}

func (p *listPrinter) flush() error {
	switch {
	case p.n == 1 && p.single:
		return p.object(p.out, p.first)
	case p.n <= 1:
		if err := p.start(); err != nil {
			return err
		}
		if p.n == 1 {
			if err := p.item(p.first, true); err != nil {
				return err
			}
		}
	}
	return p.end()
}

// object prints m as kubectl prints one object.
func (p *listPrinter) object(w io.Writer, m map[string]any) error {
	pr, err := p.newPrinter()
	if err != nil {
		return err
	}
	return pr.PrintObj(&unstructured.Unstructured{Object: m}, w)
}

func (p *listPrinter) start() error {
	var err error
	if p.json {
		_, err = io.WriteString(p.out, "{\n    \"apiVersion\": \"v1\",\n    \"items\": [")
	} else {
		_, err = io.WriteString(p.out, "apiVersion: v1\nitems:")
	}
	return err
}

// item writes m as the next element of the List, indented as kubectl's
// printers indent a List's items.
func (p *listPrinter) item(m map[string]any, first bool) error {
	var obj bytes.Buffer
	if err := p.object(&obj, m); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(obj.String(), "\n"), "\n")
	var buf bytes.Buffer
	if p.json && !first {
		buf.WriteString(",")
	}
	for i, line := range lines {
		buf.WriteString("\n")
		switch {
		case p.json:
			buf.WriteString("        ")
		case i == 0:
			buf.WriteString("- ")
		case line != "":
			buf.WriteString("  ")
		}
		buf.WriteString(line)
	}
	_, err := p.out.Write(buf.Bytes())
	return err
}

func (p *listPrinter) end() error {
	var err error
	switch {
	case p.json && p.n == 0:
		_, err = io.WriteString(p.out, "],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	case p.json:
		_, err = io.WriteString(p.out, "\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	case p.n == 0:
		_, err = io.WriteString(p.out, " []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n")
	default:
		_, err = io.WriteString(p.out, "\nkind: List\nmetadata:\n  resourceVersion: \"\"\n")
	}
	return err
}

// validateOutput checks the -o of commands that print reports, not objects
// (ls, stats).
func validateOutput(output string, allowed ...string) error {
	if output == outputTable || output == "table" {
		return nil
	}
	for _, a := range allowed {
		if output == a {
			return nil
		}
	}
	return usageErrorf("unsupported output format %q: allowed are table, %s", output, strings.Join(allowed, ", "))
}

// writeStructured prints a report as indented JSON or as YAML.
func writeStructured(out io.Writer, output string, v any) error {
	if output == outputJSON {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "    ")
		return enc.Encode(v)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
