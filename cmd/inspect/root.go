package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// defaultLockTimeout bounds the wait for a file a running process holds.
const defaultLockTimeout = 2 * time.Second

// globalOptions are the flags every command shares, plus what tests inject.
type globalOptions struct {
	file        string
	lockTimeout time.Duration
	showSecrets bool

	// now is the clock AGE columns are computed against; tests fix it.
	now func() time.Time
	// scheme decodes typed records; nil means client-go's scheme.
	scheme *runtime.Scheme
}

func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.file, "file", "f", o.file, "Cache file to read (ls, stats and verify also take it as their argument).")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", defaultLockTimeout, "How long to wait for a file that a running process holds for writing.")
	fs.BoolVar(&o.showSecrets, "show-secrets", false, "Print the data and stringData of Secrets instead of redacting them.")
}

// fileArg returns the file named by --file or by the optional positional
// argument of ls, stats and verify.
func (o *globalOptions) fileArg(args []string) (string, error) {
	switch {
	case len(args) > 0 && o.file != "" && args[0] != o.file:
		return "", usageErrorf("the file is given twice: --file %s and argument %s", o.file, args[0])
	case len(args) > 0:
		return args[0], nil
	case o.file != "":
		return o.file, nil
	}
	return "", usageErrorf("no cache file given: pass it with -f/--file")
}

// newRootCommand builds the command tree. g carries injected defaults
// (tests set now); flags fill the rest.
func newRootCommand(g *globalOptions) *cobra.Command {
	if g.now == nil {
		g.now = time.Now
	}
	if g.scheme == nil {
		g.scheme = clientgoscheme.Scheme
	}
	root := &cobra.Command{
		Use:   "inspect",
		Short: "Read a boltinformer cache file offline, like kubectl would",
		Long: `inspect reads a boltinformer cache file (or a snapshot of one) without a
cluster: which collections it holds, their objects as kubectl would print
them, their secondary indexes, the file's health, and what changed between
two snapshots. It opens files read-only and never changes them, except
'checkpoints --clear', which exists to change one.

A file that a running informer holds is locked; inspect waits --lock-timeout
and then explains how to take a hot snapshot of it.`,
		Example: `  # What does the file hold?
  inspect ls /var/lib/my-controller/cache.db

  # Pods as the controller saw them, kubectl-style
  inspect get pods -f cache.db -n storefront -o wide

  # Is the file sound?
  inspect verify cache.db`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	g.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newLsCommand(g),
		newGetCommand(g),
		newIndexCommand(g),
		newCheckpointsCommand(g),
		newStatsCommand(g),
		newVerifyCommand(g),
		newExportCommand(g),
		newDiffCommand(g),
		newCompactCommand(g),
	)
	return root
}

// run executes the command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(&globalOptions{})
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	return report(cmd, err, stderr)
}

// report prints err (if it has something to say) and maps it to an exit
// code.
func report(cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "Error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "Error:", err)
	var ue usageError
	if errors.As(err, &ue) && cmd != nil {
		fmt.Fprintf(stderr, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// exitError ends the process with code. err, if not nil, is printed; a nil
// err means the command already printed its report (verify, diff).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// subcommand is what each command's options implement, kubectl-style:
// Complete fills in what the arguments imply, Validate rejects bad
// combinations, Run does the work.
type subcommand interface {
	Complete(args []string) error
	Validate() error
	Run(out, errOut io.Writer) error
}

// runE is the cobra RunE of a subcommand.
func runE(o subcommand) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
}
