// Command commentregister prints, per package directory, how long the
// sentences in Go comments run. It reports the mean words per sentence and
// the mean colons and semicolons per sentence. Compare the register of our
// comments with the anchors' (style.md).
//
// Usage:
//
//	go run ./hack/commentregister [-tests] [-doc] [-long N] dir...
//
// Each dir is one package; a dir ending in "/..." includes its
// subdirectories. Test files count only with -tests. With -doc, only doc.go
// counts. With -long N, each sentence of more than N words is printed with its
// position.
//
// A sentence ends at '.', '!' or '?' before a space or the end of a
// paragraph. Code blocks (indented lines), directives such as //go:build,
// headings and comments above the package clause other than its doc (license
// headers) count as nothing. A colon counts only before a space or the end of
// a line, so URLs and times do not.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type tally struct {
	sentences, words, marks int
}

func (t tally) String() string {
	if t.sentences == 0 {
		return "   0 sentences"
	}
	return fmt.Sprintf("%4d sentences  %5.1f words  %4.2f colons+semicolons",
		t.sentences, float64(t.words)/float64(t.sentences), float64(t.marks)/float64(t.sentences))
}

func main() {
	tests := flag.Bool("tests", false, "count _test.go files too")
	docOnly := flag.Bool("doc", false, "count doc.go only")
	long := flag.Int("long", 0, "print each sentence of more than this many words (0: none)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: commentregister [-tests] [-doc] [-long N] dir...")
		os.Exit(2)
	}
	var total tally
	for _, arg := range flag.Args() {
		dirs := []string{arg}
		if root, ok := strings.CutSuffix(arg, "/..."); ok {
			dirs = subdirs(root)
		}
		for _, dir := range dirs {
			t, err := measureDir(dir, *tests, *docOnly, *long)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if t.sentences == 0 {
				continue
			}
			fmt.Printf("%-40s %s\n", dir, t)
			total.sentences += t.sentences
			total.words += t.words
			total.marks += t.marks
		}
	}
	fmt.Printf("%-40s %s\n", "total", total)
}

func subdirs(root string) []string {
	var dirs []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs
}

func measureDir(dir string, tests, docOnly bool, long int) (tally, error) {
	var t tally
	entries, err := os.ReadDir(dir)
	if err != nil {
		return t, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir(), !strings.HasSuffix(name, ".go"):
			continue
		case !tests && strings.HasSuffix(name, "_test.go"):
			continue
		case docOnly && name != "doc.go":
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return t, err
		}
		for _, group := range f.Comments {
			if group.End() < f.Package && group != f.Doc {
				continue // a license header or build constraint
			}
			for _, s := range sentences(commentLines(group.List)) {
				n := len(strings.Fields(s.text))
				t.sentences++
				t.words += n
				t.marks += marks(s.text)
				if long > 0 && n > long {
					fmt.Printf("%s: %d words: %s\n", fset.Position(s.pos), n, s.text)
				}
			}
		}
	}
	return t, nil
}

type line struct {
	pos  token.Pos
	text string // "" for a paragraph break, code or a directive
}

type sentence struct {
	pos  token.Pos
	text string
}

// commentLines returns the prose lines of a comment group. Code, directives
// and headings become paragraph breaks.
func commentLines(list []*ast.Comment) []line {
	var lines []line
	for _, c := range list {
		if rest, ok := strings.CutPrefix(c.Text, "//"); ok {
			lines = append(lines, classify(c.Slash, rest))
			continue
		}
		body := strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/")
		for _, l := range strings.Split(body, "\n") {
			lines = append(lines, classify(c.Slash, l))
		}
	}
	return lines
}

func classify(pos token.Pos, raw string) line {
	switch {
	case raw == "", strings.TrimSpace(raw) == "":
		return line{pos: pos}
	case !strings.HasPrefix(raw, " "), strings.HasPrefix(raw, "  "), strings.HasPrefix(raw, " \t"):
		// //go:build, //nolint:..., or an indented code block.
		return line{pos: pos}
	case strings.HasPrefix(raw, " # "):
		return line{pos: pos}
	}
	text := strings.TrimSpace(raw)
	// A list item starts a sentence of its own.
	for _, bullet := range []string{"- ", "* ", "+ "} {
		if rest, ok := strings.CutPrefix(text, bullet); ok {
			return line{pos: pos, text: "\x00" + rest}
		}
	}
	return line{pos: pos, text: text}
}

// sentences splits prose lines into sentences. A paragraph break or a list
// item ends the sentence before it.
func sentences(lines []line) []sentence {
	var out []sentence
	var cur []string
	var start token.Pos
	flush := func() {
		if s := strings.TrimSpace(strings.Join(cur, " ")); s != "" && len(strings.Fields(s)) > 0 {
			out = append(out, sentence{pos: start, text: s})
		}
		cur = nil
	}
	for _, l := range lines {
		if l.text == "" {
			flush()
			continue
		}
		text := l.text
		if rest, ok := strings.CutPrefix(text, "\x00"); ok {
			flush()
			text = rest
		}
		words := strings.Fields(text)
		for i, w := range words {
			if len(cur) == 0 {
				start = l.pos
			}
			cur = append(cur, w)
			if endsSentence(w) && (i < len(words)-1 || true) {
				flush()
			}
		}
	}
	flush()
	return out
}

// endsSentence reports whether a word ends a sentence: it ends in '.', '!'
// or '?', perhaps followed by closing quotes or brackets, and is not a common
// abbreviation.
func endsSentence(w string) bool {
	t := strings.TrimRight(w, ")\"'`]")
	if t == "" {
		return false
	}
	switch strings.ToLower(t) {
	case "e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.":
		return false
	}
	last := t[len(t)-1]
	return last == '.' || last == '!' || last == '?'
}

// marks counts semicolons, and colons that end a word (so "http://" and
// "12:30" do not count).
func marks(s string) int {
	n := strings.Count(s, ";")
	for _, w := range strings.Fields(s) {
		if strings.HasSuffix(strings.TrimRight(w, ")\"'`"), ":") {
			n++
		}
	}
	return n
}
