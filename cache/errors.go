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
// back from the cache file. The informer stopped before the list that
// restores them was applied. Reads that could show the objects as absent
// return it. Where client-go's signature has no error, they panic with it
// (see doc.go). The next start lists.
var ErrIncomplete = errors.New("the informer's store lacks objects it could not read back from the cache file, and the informer stopped before relisting them")

// errStopping means the informer stopped before a warm start's walk handed
// every stored key out. Deltas about every key were then left unapplied.
// Their notifications would reach start handlers not given those keys. The
// deltas are dropped as if the stop had come first, and nothing is recorded.
var errStopping = errors.New("boltinformer: the informer stopped before the stored objects were all handed out; deltas about every key were not applied")
