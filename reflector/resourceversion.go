package reflector

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// isInvalidResourceVersionError reports whether the server refused the
// resourceVersion asked for as one it cannot parse. Such a version is
// unavailable as an expired one is, and the reflector lists at "" instead.
// A cache file's stored version may be damaged into one (persist rejects
// only what no server gives). Relisting at it would be refused for ever.
//
// kube-apiserver refuses a watch with 422 Invalid, naming the field
// resourceVersion. Its list path passes the storage layer's error through
// unconverted, as a 500 whose message names the field. Other servers
// answer 400 Bad Request. So a 400, 422 or 500 counts if it names the
// field and calls the value invalid.
func isInvalidResourceVersionError(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) || s == nil {
		return false
	}
	st := s.Status()
	switch st.Code {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusInternalServerError:
	default:
		return false
	}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Field == "resourceVersion" {
				return true
			}
		}
	}
	msg := strings.ToLower(st.Message)
	return strings.Contains(msg, "resourceversion") && strings.Contains(msg, "invalid")
}
