package listrules_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/listrules"
)

const (
	exact        = metav1.ResourceVersionMatchExact
	notOlderThan = metav1.ResourceVersionMatchNotOlderThan
)

// The API concepts page's table "Semantics for get and list", with the
// validation kube-apiserver applies before it.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		opts metav1.ListOptions
		want listrules.Semantics
	}{
		{metav1.ListOptions{}, listrules.Consistent},
		{metav1.ListOptions{Limit: 500}, listrules.Consistent},
		{metav1.ListOptions{ResourceVersion: "0"}, listrules.Any},
		{metav1.ListOptions{ResourceVersion: "0", Limit: 500}, listrules.Any},
		{metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: notOlderThan, Limit: 500}, listrules.Any},
		{metav1.ListOptions{ResourceVersion: "10"}, listrules.NotOlderThan},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: notOlderThan}, listrules.NotOlderThan},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: notOlderThan, Limit: 500}, listrules.NotOlderThan},
		{metav1.ListOptions{ResourceVersion: "10", Limit: 500}, listrules.Exact},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: exact}, listrules.Exact},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: exact, Limit: 500}, listrules.Exact},
		{metav1.ListOptions{Continue: "c", Limit: 500}, listrules.Continue},
		{metav1.ListOptions{ResourceVersionMatch: notOlderThan}, listrules.Invalid},
		{metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: exact}, listrules.Invalid},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: "Newest"}, listrules.Invalid},
		{metav1.ListOptions{ResourceVersion: "10", Continue: "c"}, listrules.Invalid},
		{metav1.ListOptions{Continue: "c", ResourceVersionMatch: notOlderThan}, listrules.Invalid},
	} {
		got, err := listrules.Of(tc.opts)
		if got != tc.want || (err != nil) != (tc.want == listrules.Invalid) {
			t.Errorf("Of(%+v) = %v, %v; want %v", tc.opts, got, err, tc.want)
		}
	}
}

func TestRelistAndSyncTarget(t *testing.T) {
	for _, tc := range []struct {
		opts         metav1.ListOptions
		held         string
		relist, sync bool // the checks pass
	}{
		{metav1.ListOptions{ResourceVersion: "0"}, "", true, false},
		{metav1.ListOptions{ResourceVersion: "0", Limit: 500}, "10", false, false},
		{metav1.ListOptions{}, "10", true, true},
		{metav1.ListOptions{Limit: 1}, "10", true, true},
		{metav1.ListOptions{ResourceVersion: "10"}, "10", true, false},
		{metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: notOlderThan, Limit: 3}, "10", true, false},
		{metav1.ListOptions{ResourceVersion: "9", ResourceVersionMatch: notOlderThan}, "10", false, false},
		{metav1.ListOptions{ResourceVersion: "10", Limit: 3}, "10", false, false},
		{metav1.ListOptions{ResourceVersion: "12", ResourceVersionMatch: exact}, "10", false, false},
		{metav1.ListOptions{Continue: "c", Limit: 3}, "10", true, false},
		{metav1.ListOptions{ResourceVersion: "10", Continue: "c"}, "10", false, false},
	} {
		if err := listrules.Relist(tc.opts, tc.held); (err == nil) != tc.relist {
			t.Errorf("Relist(%+v, %q) = %v, want passing %v", tc.opts, tc.held, err, tc.relist)
		}
		if err := listrules.SyncTarget(tc.opts); (err == nil) != tc.sync {
			t.Errorf("SyncTarget(%+v) = %v, want passing %v", tc.opts, err, tc.sync)
		}
	}
}
