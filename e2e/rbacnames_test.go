package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// RBAC objects' names may hold "," and "=", which a field selector must
// escape. A recovery fetches each changed object by name: across an
// apiserver restart, an informer of Roles so named must sync, and its
// lister must hold exactly the server's Roles.
func TestRecoveryFetchesNamesASelectorMustEscape(t *testing.T) {
	const ns = "rbac-names"
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, ns)
	odd := []string{"read,write", "a=b", `back\slash`, "x,y=z"}
	names := slices.Clone(odd)
	for i := range 40 { // unchanged ones, so that the recovery fetches by name
		names = append(names, fmt.Sprintf("role-%02d", i))
	}
	for _, name := range names {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Role %q: %v", name, err)
		}
	}
	path := cachePath(t)
	start := func() (*factory.Factory, func()) {
		db := openDB(t, path)
		f := factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithNamespace(ns))
		f.Rbac().V1().Roles().Informer()
		runCtx, stopRun := context.WithCancel(ctx)
		syncCtx, cancelSync := context.WithTimeout(runCtx, time.Minute)
		defer cancelSync()
		f.Start(runCtx.Done())
		for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				stopRun()
				f.Shutdown()
				t.Fatalf("%v did not sync", typ)
			}
		}
		return f, func() {
			stopRun()
			f.Shutdown()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}

	_, stop := start() // cold
	stop()
	// While it is down the oddly named Roles change; the restart expires
	// every resourceVersion, so the warm start recovers.
	for _, name := range odd {
		role, err := admin.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		role.Rules[0].Verbs = append(role.Rules[0].Verbs, "list")
		if _, err := admin.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update Role %q: %v", name, err)
		}
	}
	srv.RestartAPIServer(t)

	f, stop := start() // warm: a 410, then the recovery
	defer stop()
	want := map[string]string{}
	server, err := admin.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range server.Items {
		want[r.Name] = r.ResourceVersion
	}
	poll.Until(t, time.Minute, "the lister to hold the server's Roles", func() bool {
		got, err := f.Rbac().V1().Roles().Lister().Roles(ns).List(klabels.Everything())
		if err != nil || len(got) != len(want) {
			return false
		}
		for _, r := range got {
			if want[r.Name] != r.ResourceVersion {
				return false
			}
		}
		return true
	})
}
