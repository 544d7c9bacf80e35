package wire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed reports bytes that are not a well-formed message of the
// layout being read, or a stream that ended or failed inside one.
var ErrMalformed = errors.New("malformed protobuf")

// errWireType: a known field has another wire type than its declared one.
var errWireType = fmt.Errorf("%w: wrong wire type", ErrMalformed)

// parseError wraps protowire's error code n (negative) as ErrMalformed.
func parseError(what string, n int) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformed, what, protowire.ParseError(n))
}
