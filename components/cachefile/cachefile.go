// Package cachefile is the one cache file a control-plane component keeps
// all its informers in: the flag that names it, and opening it.
//
// Every informer factory the component builds (typed, dynamic and metadata)
// shares the file; each informer is a collection of its own, so the three
// never see each other's objects.
package cachefile

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
)

// FlagName is the command-line flag that names the cache file.
const FlagName = "boltinformer-cache-file"

// Flag holds the cache file's path as given on the command line.
type Flag struct {
	Path string
}

// AddTo adds the flag to fs.
func (f *Flag) AddTo(fs *pflag.FlagSet) {
	fs.StringVar(&f.Path, FlagName, f.Path, "The file that keeps every informer's objects and resourceVersion between runs "+
		"(created if missing; one process at a time). On a restart the informers resume their watches from it instead of listing again.")
}

// Open opens the file the flag names, creating it if it does not exist.
// The file is locked until Close; a second process waiting for it fails
// after persist.DefaultLockTimeout with an error that says so.
func (f *Flag) Open() (*persist.DB, error) {
	if f.Path == "" {
		return nil, errors.New("--" + FlagName + " is required: it names the file the informers keep their state in")
	}
	db, err := persist.Open(f.Path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagName, err)
	}
	return db, nil
}
