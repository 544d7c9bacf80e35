package reflectortest

import (
	"context"
	"errors"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// The call strings and tracked versions are what the reflector's tests
// compare against, so each write must leave exactly this record.
func TestRecordingStoreRecordsEachWrite(t *testing.T) {
	s := NewRecordingStore()
	boom := errors.New("boom")
	s.SetResyncErr(boom)
	for _, err := range []error{
		s.Replace([]interface{}{Pod("a", "1"), Pod("b", "2")}, "5"),
		s.Add(Pod("c", "6")),
		s.Update(Pod("a", "7")),
		s.Delete(Pod("b", "8")),
		s.Bookmark("9"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Load([]interface{}{Pod("d", "3")})
	if err := s.Resync(); !errors.Is(err, boom) {
		t.Errorf("first Resync: %v, want %v", err, boom)
	}
	if err := s.Resync(); err != nil {
		t.Errorf("second Resync: %v, want nil", err)
	}
	Equal(t, "calls", s.Calls(), []string{"replace 2@5", "add c@6", "update a@7", "delete b@8", "bookmark@9"})
	Equal(t, "objects", s.Objects(), map[string]string{"a": "7", "c": "6", "d": "3"})
	Equal(t, "resyncs", s.Resyncs(), 2)
}

// Requests leaves out the limit=1 reads at "". Watcher finds a fake watcher
// by the index of its Watch call, also after a call that failed.
func TestScriptedLWRecordsRequests(t *testing.T) {
	f := &ScriptedLW{
		T: t,
		List: func(n int, _ metav1.ListOptions) (runtime.Object, error) {
			return PodList(strconv.Itoa(10 + n)), nil
		},
		Watch: func(n int, _ metav1.ListOptions) (watch.Interface, error) {
			if n == 0 {
				return nil, errors.New("refused")
			}
			return watch.NewRaceFreeFake(), nil
		},
	}
	lw := f.ListWatch()
	ctx := context.Background()
	for _, opts := range []metav1.ListOptions{{Limit: 1}, {ResourceVersion: "0"}} {
		if _, err := lw.ListWithContext(ctx, opts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err == nil {
		t.Fatal("the first Watch did not fail as scripted")
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	Equal(t, "requests", f.Requests(), []string{"list@0", "watch@10", "watch@11"})
	Equal(t, "list RVs", f.ListRVs(), []string{"", "0"})
	Equal(t, "watch RVs", f.WatchRVs(), []string{"10", "11"})
	if got := f.Watcher(t, 1); got != w {
		t.Errorf("Watcher(1) = %p, want the second Watch's %p", got, w)
	}
}

// Starts keeps only the Resumed and Listed calls, in order.
func TestRecordingObserverStarts(t *testing.T) {
	var o RecordingObserver[string]
	o.Resumed("5")
	o.WatchStarted("5")
	o.WatchEnded(errors.New("gone"))
	o.Listed("expired", "10", 2, 1)
	o.WatchStarted("10")
	o.WatchEnded(nil)
	o.Add("recovered expired 10")
	Equal(t, "events", o.Events(), []string{"resumed 5", "watch 5", "ended error", "listed expired 10 items=2 pages=1", "watch 10", "ended ok", "recovered expired 10"})
	Equal(t, "starts", o.Starts(), []string{"resumed 5", "listed expired 10 items=2 pages=1"})
}
