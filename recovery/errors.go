package recovery

import "errors"

// ErrUnsupported is returned by a Store that cannot recover now. Its
// objects are not where it can compare them. The reflector then lists in
// full.
var ErrUnsupported = errors.New("recovery: store cannot recover")
