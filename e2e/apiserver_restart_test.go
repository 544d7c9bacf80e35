package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestApiserverRestartWhileRunning restarts kube-apiserver under a running
// informer, twice, changing objects while the server is back up each time.
// The open watch breaks mid-stream; the informer re-watches from its last
// resourceVersion, is told that version expired (every older version does
// across an apiserver restart), relists once per restart, and ends with
// exactly the server's state, in memory and in the file.
func TestApiserverRestartWhileRunning(t *testing.T) {
	const test = "restart"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"restart-0", "restart-1"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, 500)

	selector := e2eLabel + "=" + test
	obs := &observer{}
	db := openDB(t, cachePath(t))
	inf := newInformer(t, informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil), db: db, observer: obs})
	r := run(t, inf)
	waitSynced(t, inf)

	for round := 0; round < 2; round++ {
		srv.RestartAPIServer(t)
		// Create, patch and delete while the informer's watch is re-established.
		keys := sortedKeys(storeState(t, inf.GetStore()))
		for i := 0; i < 50; i++ {
			ns := namespaces[i%len(namespaces)]
			if _, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap(ns, fmt.Sprintf("round%d-%03d", round, i), test, i), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create: %v", err)
			}
			ns, name := splitKey(keys[2*i])
			if _, err := admin.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"data":{"round":"`+strconv.Itoa(round)+`"}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("patch: %v", err)
			}
			ns, name = splitKey(keys[2*i+1])
			if err := admin.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		server := serverConfigMaps(t, admin, "", selector)
		waitServerState(t, 2*time.Minute, "the informer to converge after an apiserver restart", server,
			func() state { return serverConfigMaps(t, admin, "", selector) }, inf, obs)
	}
	relists := 0
	for _, c := range obs.startCauses() {
		if c == reflector.CauseRelistExpired || c == reflector.CauseRelistError {
			relists++
		}
	}
	if relists < 1 || relists > 2 {
		t.Errorf("start causes %v: want one relist per apiserver restart at most, and at least one", obs.startCauses())
	}
	r.stop()
	// The file holds what memory held.
	final := serverConfigMaps(t, admin, "", selector)
	requireSameState(t, "store after two apiserver restarts", final, storeState(t, inf.GetStore()))
	// The informer closed its collection: the file is read through db.
	if rv := committedRV(t, db, inf.Indexer().Collection().Name()); rv != inf.Indexer().Collection().ResourceVersion() {
		t.Errorf("committed RV %s, applied %s after stop", rv, inf.Indexer().Collection().ResourceVersion())
	}
	t.Logf("start causes: %v", obs.startCauses())
}
