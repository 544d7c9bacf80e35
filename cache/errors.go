package cache

import (
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// handleReadError reports a read error from a method whose client-go
// signature cannot return one.
func handleReadError(method string, err error) {
	utilruntime.HandleError(fmt.Errorf("boltinformer: %s: %w", method, err))
}
