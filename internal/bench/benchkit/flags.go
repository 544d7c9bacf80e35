package benchkit

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Flags are the flags every harness takes.
type Flags struct {
	Pods, Reps int
	Out        string
}

// NewFlags registers --pods, --reps and --out on fs with these defaults;
// --out defaults to OutDir(sub). They are set once fs is parsed.
func NewFlags(fs *flag.FlagSet, pods, reps int, sub string) *Flags {
	f := &Flags{Pods: pods, Reps: reps}
	fs.Func("pods", fmt.Sprintf("Pods to create unless they exist, e.g. 5000 or 10k (default %s).", CountLabel(pods)), func(v string) (err error) {
		f.Pods, err = ParseCount(v)
		return err
	})
	fs.IntVar(&f.Reps, "reps", reps, "Repetitions of every start; the report shows medians.")
	fs.StringVar(&f.Out, "out", OutDir(sub), "Directory for the results: JSON, and the text and plots rendered from it.")
	return f
}

// ParseCount reads a count: 5000, 10k or 1.5m.
func ParseCount(s string) (int, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1e6, strings.TrimSuffix(s, "m")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("bad count %q: want e.g. 5000, 10k or 100k", s)
	}
	return int(f * mult), nil
}

// ParseAmount reads a count of 0 or more (ParseCount), or a percentage of
// of (1%), rounded to the nearest.
func ParseAmount(s string, of int) (int, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("bad percentage %q", s)
		}
		return int(math.Round(f / 100 * float64(of))), nil
	}
	if s == "0" {
		return 0, nil
	}
	return ParseCount(s)
}
