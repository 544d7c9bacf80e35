package reflector

import (
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// invalidVersionErrors are the answers a server gives to a request at a
// resourceVersion it cannot parse. kube-apiserver refuses a watch with 422
// Invalid naming the field, and a list with a 500 whose message names it
// (its list path does not convert the storage layer's error). Others
// answer 400 Bad Request.
func invalidVersionErrors(rv string) map[string]error {
	why := `strconv.ParseUint: parsing "` + rv + `": invalid syntax`
	return map[string]error{
		"400": apierrors.NewBadRequest("invalid resourceVersion " + rv),
		"422": apierrors.NewInvalid(schema.GroupKind{Kind: "pods"}, "", field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, why)}),
		"500": &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonUnknown,
			Message: `resourceVersion: Invalid value: "` + rv + `": ` + why}},
	}
}

// A stored resourceVersion the server cannot parse (damage to the file
// the cache could not tell from a real one) is unavailable, as an expired
// one is: the reflector lists at "" at once. It relisted at that version
// instead, which the server refused for ever, so the informer never
// synced.
func TestInvalidVersionListsAtEmpty(t *testing.T) {
	const bad = "x%"
	for name, refusal := range invalidVersionErrors(bad) {
		t.Run("ListFrom/"+name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{T: t, List: func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
				if opts.ResourceVersion == bad {
					return nil, refusal
				}
				return reflectortest.PodList("200", reflectortest.Pod("a", "150")), nil
			}}
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ListFrom = bad })
			stop := h.run()
			lw.Watcher(t, 0)
			stop()
			reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{bad, ""})
			reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{"200"})
			reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 1@200"})
		})
		t.Run("Resume/"+name, func(t *testing.T) {
			lw := &reflectortest.ScriptedLW{
				T: t,
				List: func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
					if opts.ResourceVersion == bad {
						return nil, refusal
					}
					return reflectortest.PodList("200", reflectortest.Pod("a", "150")), nil
				},
				Watch: func(_ int, opts metav1.ListOptions) (watch.Interface, error) {
					if opts.ResourceVersion == bad {
						return nil, refusal
					}
					return watch.NewRaceFreeFake(), nil
				},
			}
			h := newHarness(t, lw.ListWatch(), func(o *Options) { o.ResumeResourceVersion = bad })
			stop := h.run()
			lw.Watcher(t, 1)
			stop()
			reflectortest.Equal(t, "list RVs", lw.ListRVs(), []string{""})
			reflectortest.Equal(t, "watch RVs", lw.WatchRVs(), []string{bad, "200"})
			reflectortest.Equal(t, "store calls", h.store.Calls(), []string{"replace 1@200"})
			if errs := h.errs.Errors(); len(errs) != 1 || !errors.Is(errs[0], ErrWatch) {
				t.Errorf("errors = %v, want the refused watch", errs)
			}
		})
	}
}
