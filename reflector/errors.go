// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/reflector.go
// The ports are listed in hack/upstream-versions.txt.

package reflector

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Every error the Reflector hands to Options.WatchErrorHandler, or returns
// from ListAndWatch, wraps exactly one of these sentinels. It also wraps
// the underlying cause, where there is one. Test with errors.Is. API
// errors stay reachable through the wrapping, so
// apierrors.IsResourceExpired(err) and friends work too.
var (
	// ErrList reports a list that failed after client-go's resourceVersion
	// fallbacks were tried. The next ListAndWatch lists again, after backoff.
	ErrList = errors.New("reflector: list failed")

	// ErrWatch reports a watch that could not be started or that ended with
	// an error. Such an error is an in-stream ERROR event, or a close in
	// under a second without delivering anything. The reflector relists when
	// the cause says the resourceVersion expired or is too large. It also
	// relists at the second failure in a row, not counting connection
	// refused and 429. Otherwise it backs off and watches again from
	// LastSyncResourceVersion.
	ErrWatch = errors.New("reflector: watch failed")

	// ErrUnexpectedObject reports a watch event that was skipped. Its object
	// may have another Go type than Options.ExpectedType, or another GVK
	// than Options.ExpectedGVK. Or it is a Table, it has no object metadata,
	// or the event type is unknown.
	ErrUnexpectedObject = errors.New("reflector: unexpected watch event object")

	// ErrStore reports a Store method that returned an error. A failed Add,
	// Update, Delete or Bookmark is reported, and the event is dropped, as
	// client-go does. A failed Replace fails the list. A failed Resync ends
	// the watch and forces a relist, as client-go does.
	ErrStore = errors.New("reflector: store rejected write")

	// ErrFullList is returned by a Relister that cannot make this list. The
	// reflector then lists in full, as client-go's does.
	ErrFullList = errors.New("reflector: relist not possible, listing in full")
)

// watchStartError is a watch that could not be started. It wraps ErrWatch
// and the ListerWatcher's error as its cause. client-go's error handler gets
// that cause itself, so the default handler judges this one by it alone.
type watchStartError struct {
	context string // what was started, for the message
	cause   error
}

func (e *watchStartError) Error() string {
	return ErrWatch.Error() + ": " + e.context + ": " + e.cause.Error()
}

func (e *watchStartError) Unwrap() []error { return []error{ErrWatch, e.cause} }

// errStopRequested says the context was cancelled while watching. It
// mirrors client-go's errorStopRequested and never leaves the package.
var errStopRequested = errors.New("stop requested")

// isExpiredError mirrors client-go's isExpiredError, matching HTTP 410 with
// reason Expired, which servers send since 1.18. It also matches
// reason Gone, from older servers and statuses without a known reason.
func isExpiredError(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeResourceVersionError mirrors client-go's function of the same
// name, including the message matching needed for 1.17–1.18.5 servers.
func isTooLargeResourceVersionError(err error) bool {
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return true
	}
	if !apierrors.IsTimeout(err) {
		return false
	}
	var apierr apierrors.APIStatus
	if !errors.As(err, &apierr) || apierr == nil || apierr.Status().Details == nil {
		return false
	}
	for _, cause := range apierr.Status().Details.Causes {
		if cause.Message == "Too large resource version" {
			return true
		}
	}
	return strings.Contains(apierr.Status().Message, "Too large resource version")
}

// isRetriableWatchError mirrors client-go's isWatchErrorRetriable, which it
// applies to watch-start errors, and its in-stream 429 handling. The server
// is unreachable (connection refused) or shedding load (429). So the watch
// is retried after backoff without limit and never relists.
func isRetriableWatchError(err error) bool {
	return utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)
}

// isResourceVersionUnavailable reports whether err means the requested
// resourceVersion is too old or too new to be served. That is the one watch
// failure that relists at once.
func isResourceVersionUnavailable(err error) bool {
	return isExpiredError(err) || isTooLargeResourceVersionError(err)
}
