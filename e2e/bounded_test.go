package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestBoundedColdStartListsInPages cold-starts a bounded informer (a
// 100-object cache) against the real apiserver: its list is a consistent
// read in pages of 500, each stored before the next is asked for, and the
// store ends up exactly the server's; the handler gets one OnAdd(obj, true)
// per object, then the watch's events. A restart on the same file resumes
// without listing and serves every object.
func TestBoundedColdStartListsInPages(t *testing.T) {
	const test, n = "bounded", 1200
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"bounded-0", "bounded-1", "bounded-2"}
	createNamespaces(t, admin, namespaces...)
	populatePods(t, admin, test, namespaces, n)
	selector := e2eLabel + "=" + test
	want := serverPods(t, admin, "", selector)

	path := cachePath(t)
	db := openDB(t, path)
	cs := newClientset(t, srv.Config(), nil)
	spec := informerSpec{cs: cs, db: db, collection: "pods-" + selector, resource: "pods", selector: selector, cacheObjects: 100}
	obs, rec := &observer{}, &recorder{}
	spec.observer = obs
	inf := newInformer(t, spec)
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, inf)
	waitSynced(t, inf, reg)

	if got := fmt.Sprint(obs.startCauses(), obs.listPages()); got != fmt.Sprint([]reflector.StartCause{reflector.CauseCold}, []int{3}) {
		t.Errorf("lists (causes, pages) = %s, want one cold list in 3 pages", got)
	}
	requireSameState(t, "bounded informer's store", want, storeState(t, inf.GetStore()))
	adds := map[string]int{}
	for _, e := range rec.snapshot() {
		if e.kind != evAdd || !e.initial || want[e.key] != e.rv {
			t.Errorf("unexpected handler call %v", e)
			continue
		}
		adds[e.key]++
	}
	for key := range want {
		if adds[key] != 1 {
			t.Errorf("%s: %d initial adds, want 1", key, adds[key])
		}
	}

	// The watch follows the list.
	created, err := admin.CoreV1().Pods(namespaces[0]).Create(context.Background(), pod(namespaces[0], "after-list", test), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := namespaces[0] + "/after-list"
	poll.Until(t, 30*time.Second, "the watch's add", func() bool { return rec.seen(key) })
	for _, e := range rec.snapshot() {
		if e.key == key && (e.kind != evAdd || e.initial || e.rv != created.ResourceVersion) {
			t.Errorf("after the list: %v, want an add (not initial) at %s", e, created.ResourceVersion)
		}
	}
	r.stop()

	// A restart resumes: no list, every object served.
	want[key] = created.ResourceVersion
	obs2 := &observer{}
	spec.observer = obs2
	inf2 := newInformer(t, spec)
	rec2 := &recorder{}
	reg2, err := inf2.AddEventHandler(rec2)
	if err != nil {
		t.Fatal(err)
	}
	run(t, inf2)
	waitSynced(t, inf2, reg2)
	if got := obs2.startCauses(); len(got) == 0 || got[0] != reflector.CauseResumed {
		t.Errorf("restart: start causes %v, want resumed first", got)
	}
	requireSameState(t, "restarted bounded informer's store", want, storeState(t, inf2.GetStore()))
	if rec2.len() != len(want) {
		t.Errorf("restart: %d handler calls, want %d initial adds", rec2.len(), len(want))
	}
}
