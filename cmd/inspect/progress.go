package main

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/term"
)

// progress reports a long operation's advance on a terminal. A nil
// *progress reports nothing, which is what newProgress returns when stderr
// is not a terminal: piped and redirected runs stay quiet.
type progress struct {
	w     io.Writer
	label string
	total int
	done  int
	every time.Duration
	last  time.Time
	shown bool
	now   func() time.Time
}

// newProgress returns a progress reporter on errOut if it is a terminal.
func newProgress(errOut io.Writer, label string, total int) *progress {
	f, ok := errOut.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newProgressTo(errOut, label, total)
}

func newProgressTo(w io.Writer, label string, total int) *progress {
	return &progress{w: w, label: label, total: total, every: 100 * time.Millisecond, now: time.Now}
}

// add counts n more items done and redraws the line at most every p.every.
func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.done += n
	if p.done%64 != 0 && p.done != p.total {
		return
	}
	if now := p.now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.shown = true
		pct := 100
		if p.total > 0 {
			pct = p.done * 100 / p.total
		}
		fmt.Fprintf(p.w, "\r%s: %d/%d records (%d%%)", p.label, p.done, p.total, pct)
	}
}

// finish erases the progress line.
func (p *progress) finish() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
}
