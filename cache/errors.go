package cache

import (
	"errors"
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// handleReadError reports a read error from a method whose client-go
// signature cannot return one.
func handleReadError(method string, err error) {
	utilruntime.HandleError(fmt.Errorf("boltinformer: %s: %w", method, err))
}

// ErrIncomplete means an informer's store lacks objects it could not read
// back from the cache file, and the informer stopped before the list that
// restores them was applied. Reads that could show the objects as absent
// return it, or panic with it where client-go's signature has no error
// (see doc.go); the next start lists.
var ErrIncomplete = errors.New("the informer's store lacks objects it could not read back from the cache file, and the informer stopped before relisting them")

// errStopping means the informer stopped before a warm start's walk handed
// every stored key out, and deltas about every key were left unapplied:
// their notifications would reach start handlers not given those keys. The
// deltas are dropped as if the stop had come first; nothing is recorded.
var errStopping = errors.New("boltinformer: the informer stopped before the stored objects were all handed out; deltas about every key were not applied")
