package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output formats of get and index.
const (
	outputTable = ""
	outputWide  = "wide"
	outputYAML  = "yaml"
	outputJSON  = "json"
	outputName  = "name"
)

var objectOutputs = []string{outputWide, outputYAML, outputJSON, outputName}

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

// printOptions say how objects are printed.
type printOptions struct {
	output     string
	showLabels bool
	// allNamespaces adds a NAMESPACE column to tables.
	allNamespaces bool
	// single prints one YAML/JSON object as itself rather than as a List
	// (kubectl get TYPE NAME).
	single  bool
	content contentOptions
	now     time.Time
}

// printer prints objects one at a time; flush ends the output.
type printer interface {
	print(o *object) error
	flush() error
}

func (f *cacheFile) newPrinter(out io.Writer, opts printOptions) printer {
	switch opts.output {
	case outputYAML, outputJSON:
		return &listPrinter{out: out, json: opts.output == outputJSON, single: opts.single, opts: opts.content}
	case outputName:
		return namePrinter{out}
	}
	return &tablePrinter{f: f, out: out, opts: opts, groups: map[string]*tableGroup{}}
}

type namePrinter struct{ out io.Writer }

func (p namePrinter) print(o *object) error {
	_, err := fmt.Fprintf(p.out, "%s/%s\n", o.kindName(), o.Name())
	return err
}

func (namePrinter) flush() error { return nil }

// tablePrinter prints kubectl's table for each kind, one table per kind in
// order of first appearance.
type tablePrinter struct {
	f      *cacheFile
	out    io.Writer
	opts   printOptions
	order  []string
	groups map[string]*tableGroup
}

type tableGroup struct {
	def        tableDef
	kind       string
	rows       [][]string
	namespaces []string
	labels     []string
}

func (p *tablePrinter) print(o *object) error {
	def, obj := p.f.tableFor(o)
	id := o.GVK.GroupKind().String()
	g := p.groups[id]
	if g == nil {
		g = &tableGroup{def: def, kind: o.kindName()}
		p.groups[id] = g
		p.order = append(p.order, id)
	}
	wide := p.opts.output == outputWide
	var row []string
	if def.row != nil {
		row = def.row(obj, p.opts.now, wide)
	} else {
		row = genericRow(o, p.opts.now)
	}
	g.rows = append(g.rows, row)
	g.namespaces = append(g.namespaces, o.Namespace())
	g.labels = append(g.labels, formatLabels(o.Labels()))
	return nil
}

func (p *tablePrinter) flush() error {
	w := tabwriter.NewWriter(p.out, 6, 4, 3, ' ', 0)
	for i, id := range p.order {
		g := p.groups[id]
		if i > 0 {
			fmt.Fprintln(w)
		}
		withNS := false
		if p.opts.allNamespaces {
			for _, ns := range g.namespaces {
				withNS = withNS || ns != ""
			}
		}
		header := append([]string(nil), g.def.columns...)
		if p.opts.output == outputWide {
			header = append(header, g.def.wide...)
		}
		if withNS {
			header = append([]string{"NAMESPACE"}, header...)
		}
		if p.opts.showLabels {
			header = append(header, "LABELS")
		}
		fmt.Fprintln(w, strings.Join(header, "\t"))
		for r, row := range g.rows {
			if len(p.order) > 1 {
				row[0] = g.kind + "/" + row[0]
			}
			if withNS {
				row = append([]string{g.namespaces[r]}, row...)
			}
			if p.opts.showLabels {
				row = append(row, g.labels[r])
			}
			fmt.Fprintln(w, strings.Join(row, "\t"))
		}
	}
	return w.Flush()
}

// formatLabels is labels.FormatLabels: sorted k=v pairs, "<none>" if empty.
func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

// listPrinter prints objects as YAML or JSON: a v1 List, as kubectl does,
// or a single object. Items are written as they come, so a large List is
// never held in memory.
type listPrinter struct {
	out    io.Writer
	json   bool
	single bool
	opts   contentOptions

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
		return p.object(p.first)
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

func (p *listPrinter) object(m map[string]any) error {
	if p.json {
		return p.encodeJSON(p.out, m, "")
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	_, err = p.out.Write(b)
	return err
}

func (p *listPrinter) encodeJSON(w io.Writer, m map[string]any, prefix string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "    ")
	return enc.Encode(m)
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

func (p *listPrinter) item(m map[string]any, first bool) error {
	if p.json {
		var buf bytes.Buffer
		if !first {
			buf.WriteString(",")
		}
		buf.WriteString("\n        ")
		if err := p.encodeJSON(&buf, m, "        "); err != nil {
			return err
		}
		_, err := p.out.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return err
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("\n")
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, line := range lines {
		switch {
		case i == 0:
			buf.WriteString("- ")
		case line != "":
			buf.WriteString("  ")
		}
		buf.WriteString(line)
		if i < len(lines)-1 {
			buf.WriteString("\n")
		}
	}
	_, err = p.out.Write(buf.Bytes())
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

// writeStructured prints v as indented JSON or as YAML.
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
