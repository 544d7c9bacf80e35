package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// fieldChange is one difference between two JSON-shaped values.
type fieldChange struct {
	// path is the location: string keys of maps, int indexes of lists.
	path           []any
	old, new       any
	hasOld, hasNew bool
}

// diffJSON appends to out the differences between a and b, which are what
// encoding/json (or apimachinery's util/json) decodes into: maps, lists and
// scalars. Lists are compared element by element.
func diffJSON(path []any, a, b any, out []fieldChange) []fieldChange {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			p := appendPath(path, k)
			switch {
			case inA && inB:
				out = diffJSON(p, x, y, out)
			case inA:
				out = append(out, fieldChange{path: p, old: x, hasOld: true})
			default:
				out = append(out, fieldChange{path: p, new: y, hasNew: true})
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < max(len(av), len(bv)); i++ {
			p := appendPath(path, i)
			switch {
			case i < len(av) && i < len(bv):
				out = diffJSON(p, av[i], bv[i], out)
			case i < len(av):
				out = append(out, fieldChange{path: p, old: av[i], hasOld: true})
			default:
				out = append(out, fieldChange{path: p, new: bv[i], hasNew: true})
			}
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		out = append(out, fieldChange{path: path, old: a, new: b, hasOld: true, hasNew: true})
	}
	return out
}

func appendPath(path []any, seg any) []any {
	return append(append(make([]any, 0, len(path)+1), path...), seg)
}

// formatPath renders a path as kubectl's JSONPath without the braces:
// spec.containers[0].image, metadata.labels["app.kubernetes.io/name"].
func formatPath(path []any) string {
	var b strings.Builder
	for _, seg := range path {
		switch s := seg.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case string:
			if isIdent(s) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s)
			} else {
				b.WriteString("[" + strconv.Quote(s) + "]")
			}
		}
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || r != '-' && (r < '0' || r > '9')) {
			return false
		}
	}
	return true
}

// formatValue renders a value as compact JSON.
func formatValue(v any, present bool) string {
	if !present {
		return "(absent)"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "(unprintable)"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// redactAt redacts v, found at path in a Secret, as redactSecret would redact
// it in place: it rebuilds the object around v, redacts that, and reads v
// back. Secret values never sit below a list, so a path through one is
// returned as it is.
func redactAt(path []any, v any) any {
	skeleton := runtime.DeepCopyJSONValue(v)
	for i := len(path) - 1; i >= 0; i-- {
		key, ok := path[i].(string)
		if !ok {
			return v
		}
		skeleton = map[string]any{key: skeleton}
	}
	m, ok := skeleton.(map[string]any)
	if !ok {
		return v
	}
	redactSecret(m)
	var out any = m
	for _, seg := range path {
		out = out.(map[string]any)[seg.(string)]
	}
	return out
}
