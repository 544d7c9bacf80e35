package crsuite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// applyPatch applies a unified diff (as diff -u or git diff write it, with
// a/ and b/ prefixes) to the files under dir. It is strict: every hunk must
// apply at the line its header names, with its context unchanged, so a
// patch made for another version fails instead of landing elsewhere. Text
// before the first "--- " line is a comment.
func applyPatch(dir, patch string) error {
	lines := strings.Split(patch, "\n")
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "--- ") {
		i++
	}
	if i == len(lines) {
		return fmt.Errorf("no file in the patch")
	}
	for i < len(lines) {
		if lines[i] == "" {
			i++
			continue
		}
		if !strings.HasPrefix(lines[i], "--- a/") || i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "+++ b/") {
			return fmt.Errorf("patch line %d: want a --- a/<path> and +++ b/<path> pair, got %q", i+1, lines[i])
		}
		name := strings.Fields(strings.TrimPrefix(lines[i+1], "+++ b/"))[0]
		path := filepath.Join(dir, filepath.FromSlash(name))
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		orig := strings.Split(string(b), "\n")
		var out []string
		next := 0 // the first line of orig not yet copied to out
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "@@ "); {
			start, err := hunkStart(lines[i])
			if err != nil {
				return fmt.Errorf("patch line %d: %w", i+1, err)
			}
			if start-1 < next {
				return fmt.Errorf("patch line %d: hunks of %s overlap or are out of order", i+1, name)
			}
			out = append(out, orig[next:start-1]...)
			next = start - 1
			for i++; i < len(lines) && len(lines[i]) > 0 && strings.ContainsRune(" -+", rune(lines[i][0])); i++ {
				l := lines[i]
				if l[0] == '+' {
					out = append(out, l[1:])
					continue
				}
				if next >= len(orig) || orig[next] != l[1:] {
					return fmt.Errorf("%s:%d: the patch expects %q here; is this the controller-runtime version the patch was made for?", name, next+1, l[1:])
				}
				if l[0] == ' ' {
					out = append(out, l[1:])
				}
				next++
			}
		}
		out = append(out, orig[next:]...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hunkStart reads the old file's first line from "@@ -l,s +l,s @@".
func hunkStart(header string) (int, error) {
	f := strings.Fields(header)
	if len(f) < 4 || f[0] != "@@" || !strings.HasPrefix(f[1], "-") {
		return 0, fmt.Errorf("bad hunk header %q", header)
	}
	old, _, _ := strings.Cut(f[1][1:], ",")
	n, err := strconv.Atoi(old)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad hunk header %q", header)
	}
	return n, nil
}

// TestApplyPatch: a hunk applies at its line with its context, and a file
// that differs from the one the patch was made for is an error, not a
// patch landing elsewhere.
func TestApplyPatch(t *testing.T) {
	const patch = `comment

--- a/f.go
+++ b/f.go
@@ -2,3 +2,4 @@
 b
-c
+C
+c2
 d
`
	for _, tc := range []struct{ file, want, err string }{
		{file: "a\nb\nc\nd\ne\n", want: "a\nb\nC\nc2\nd\ne\n"},
		{file: "a\nb\nx\nd\ne\n", err: `f.go:3: the patch expects "c" here`},
		{file: "b\nc\nd\n", err: `f.go:2: the patch expects "b" here`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "f.go")
		if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		err := applyPatch(dir, patch)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("applying to %q: %v, want an error containing %q", tc.file, err, tc.err)
			}
			continue
		}
		got, _ := os.ReadFile(path)
		if err != nil || string(got) != tc.want {
			t.Errorf("applying to %q: %q, %v; want %q", tc.file, got, err, tc.want)
		}
	}
}
