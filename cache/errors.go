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
