package controllerruntime_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/boltinformer/boltinformer/controllerruntime/internal/apicount"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// TestRecoveryAfterAPIServerRestart restarts a boltcr cache after its
// stored resourceVersion expired. The apiserver restarted while the manager
// was down, which empties every watch cache's history. A downtime longer
// than the history's window does the same. The root module's
// e2e.TestRecoveryAfterChurn forces that by churn, for the core. The cache
// recovers by what changed:
//
//   - its typed and unstructured informers of ConfigMaps list metadata and
//     fetch the changed objects one by one, and no informer lists the
//     collection's objects in full (the metadata-only informer recovers
//     from its own list, which is a metadata list);
//   - the fetches and the metadata list ask for exactly the informer's
//     selection: the ConfigMaps outside it that changed too are never
//     fetched;
//   - each form ends with exactly the server's state (keys, UIDs,
//     resourceVersions);
//   - the checkpointed reconciler gets exactly the ConfigMaps updated,
//     deleted, deleted and recreated (a new UID) and created while the
//     manager was down.
func TestRecoveryAfterAPIServerRestart(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	const n = 40
	for i := range n {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%02d", i), ns, "")
	}
	// Outside the informers' selection (app=<namespace>); changed while the
	// manager is down, never to be fetched.
	for i := range 5 {
		createConfigMap(t, cs, ns, fmt.Sprintf("other-%d", i), "other", "")
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	forms := []client.Object{unstructuredConfigMap(), metadataConfigMap()}

	m := runCheckpointed(t, ns, path, srv.Config(), forms...)
	m.settle(t, cs, ns, "sentinel-cold")
	poll.Until(t, 30*time.Second, "every ConfigMap acknowledged", func() bool { return m.cp.Len() == n+1 })
	m.stop()

	ctx := context.Background()
	patch := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"changed":"while-down"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updated, deleted, recreated, created := []string{"cm-03", "cm-11", "cm-25"}, []string{"cm-05", "cm-17"}, "cm-30", []string{"new-0", "new-1"}
	for _, name := range updated {
		patch(name)
	}
	for _, name := range deleted {
		remove(name)
	}
	remove(recreated)
	createConfigMap(t, cs, ns, recreated, ns, "")
	for _, name := range created {
		createConfigMap(t, cs, ns, name, ns, "")
	}
	for i := range 5 {
		patch(fmt.Sprintf("other-%d", i))
	}
	srv.RestartAPIServer(t)

	counter := &apicount.Counter{}
	cfg := srv.Config()
	cfg.Wrap(counter.Wrap)
	m = runCheckpointed(t, ns, path, cfg, forms...)
	m.settle(t, cs, ns, "sentinel-warm")

	// Each form ends with exactly the server's state.
	server := func() map[string]string {
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, cm := range list.Items {
			out[cm.Name] = string(cm.UID) + "@" + cm.ResourceVersion
		}
		return out
	}()
	var got map[string]map[string]string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = cachedStates(t, m.cache, ns)
		for _, state := range got {
			if !maps.Equal(state, server) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for form, state := range got {
			if !maps.Equal(state, server) {
				t.Errorf("%s ConfigMaps in the cache differ from the server's:\n cache  %v\n server %v", form, state, server)
			}
		}
	}

	changed := slices.Concat(updated, deleted, []string{recreated}, created, []string{"sentinel-warm"})
	var want []string
	for _, name := range changed {
		want = append(want, ns+"/"+name)
	}
	slices.Sort(want)
	// controller-runtime's priority queue, its default, takes initial adds
	// at low priority, so changes given as such may come after the sentinel.
	if err := poll.Wait(30*time.Second, func() bool { return slices.Equal(m.reconciled(), want) }); err != nil {
		t.Errorf("after the recovery the checkpoint reconciled %v, want exactly the changes %v", m.reconciled(), want)
	}
	for _, form := range []string{"typed", "unstructured", "metadata"} {
		if got := startsOf(t, m, form, "relist-expired"); got != 1 {
			t.Errorf("%s informer: %v starts after a 410, want 1", form, got)
		}
	}
	m.stop()

	// No list of whole objects was made. The typed and unstructured
	// informers recovered, each with one metadata list and a fetch per
	// changed object present. The metadata-only informer makes a metadata
	// list too, its full list. That makes six fetches for each of the two
	// informers. The warm sentinel adds one if it was created before an
	// informer's metadata list.
	lists, watchLists := counter.Requests("configmaps", apicount.List), counter.Requests("configmaps", apicount.WatchList)
	metadata, fetches := counter.Requests("configmaps", apicount.Metadata), counter.Requests("configmaps", apicount.Fetch)
	t.Logf("after the 410: %d metadata lists (%d bytes), %d fetches (%d bytes), %d lists, %d watch-lists of ConfigMaps",
		metadata, counter.Bytes("configmaps", apicount.Metadata), fetches, counter.Bytes("configmaps", apicount.Fetch), lists, watchLists)
	if lists != 0 || watchLists != 0 {
		t.Errorf("%d lists and %d watch-lists of ConfigMaps after the 410, want none (a recovery)", lists, watchLists)
	}
	if metadata != 3 {
		t.Errorf("%d metadata lists of ConfigMaps, want 3 (two recoveries, the metadata-only informer's list)", metadata)
	}
	present := int64(len(updated) + 1 + len(created))
	if fetches < 2*present || fetches > 2*(present+1) {
		t.Errorf("%d fetches of one ConfigMap, want %d to %d: each changed ConfigMap present, once per recovering informer, and nothing outside the selection", fetches, 2*present, 2*(present+1))
	}
}

// cachedStates returns the ConfigMaps of ns in c, by form: name → UID@resourceVersion.
func cachedStates(t *testing.T, c client.Reader, ns string) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]map[string]string{}
	add := func(form string, list client.ObjectList) {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		state := map[string]string{}
		for _, o := range metaItems(t, list) {
			state[o.GetName()] = string(o.GetUID()) + "@" + o.GetResourceVersion()
		}
		out[form] = state
	}
	add("typed", &corev1.ConfigMapList{})
	u := &unstructured.UnstructuredList{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMapList")
	add("unstructured", u)
	md := &metav1.PartialObjectMetadataList{}
	md.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	add("metadata", md)
	return out
}

func metaItems(t *testing.T, list client.ObjectList) []metav1.Object {
	var out []metav1.Object
	switch l := list.(type) {
	case *corev1.ConfigMapList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *unstructured.UnstructuredList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *metav1.PartialObjectMetadataList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		t.Fatalf("metaItems: %T", list)
	}
	return out
}

// startsOf reads boltinformer_informer_starts_total for cause on m's
// informer of ConfigMaps of form.
func startsOf(t *testing.T, m *checkpointed, form, cause string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "boltinformer_informer_starts_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if strings.HasPrefix(label(s, "collection"), form+" v1 ConfigMap ") && label(s, "cause") == cause {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}
