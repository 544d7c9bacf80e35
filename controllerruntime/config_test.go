package controllerruntime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/persist"
)

// stamp is a transform that records its version in an annotation, so a
// test can see which transform shaped a stored object.
func stamp(version string) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if m, err := meta.Accessor(in); err == nil {
			a := m.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a["stamp"] = version
			m.SetAnnotations(a)
		}
		return in, nil
	}
}

// TestChangedConfigurationNeverResumes: one file, starts with different
// cache configurations. Each configuration's informers resume only what
// the same configuration stored: a changed label selector, a per-object
// field selector or a new transform version lists again, and every start
// reads what controller-runtime's default cache with the same options
// reads.
func TestChangedConfigurationNeverResumes(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	for i := range 6 {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), []string{"x", "y", "z"}[i%3], fmt.Sprintf("o%d", i%2+1))
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	type config struct {
		name             string
		opts             func() cache.Options
		transformVersion string
		wantLists        bool
	}
	base := func() cache.Options {
		return cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	}
	withLabels := func(sel string) func() cache.Options {
		return func() cache.Options {
			o := base()
			o.DefaultLabelSelector = mustSelector(sel)
			return o
		}
	}
	byField := func() cache.Options {
		o := base()
		o.ByObject = map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Field: fields.OneTermNotEqualSelector("metadata.name", "cm-1")}}
		return o
	}
	withTransform := func(version string) func() cache.Options {
		return func() cache.Options {
			o := base()
			o.DefaultTransform = stamp(version)
			return o
		}
	}
	for _, c := range []config{
		{name: "labels app=x", opts: withLabels("app=x"), wantLists: true},
		{name: "labels app in (y,z)", opts: withLabels("app in (y,z)"), wantLists: true},
		{name: "labels app=x again", opts: withLabels("app=x")},
		{name: "ByObject field selector", opts: byField, wantLists: true},
		{name: "transform v1", opts: withTransform("v1"), transformVersion: "v1", wantLists: true},
		{name: "transform v1 again", opts: withTransform("v1"), transformVersion: "v1"},
		{name: "transform v2", opts: withTransform("v2"), transformVersion: "v2", wantLists: true},
	} {
		cfg, reqs := counted()
		persistent := startCache(t, func() (cache.Cache, error) {
			return boltcr.New(cfg, c.opts(), boltcr.Options{Path: path, File: persist.Options{NoSync: true}, TransformVersion: c.transformVersion})
		})
		reference := startCache(t, func() (cache.Cache, error) { return cache.New(srv.Config(), c.opts()) })
		sameViews(t, c.name, persistent, reference, []string{ns})
		if c.transformVersion != "" {
			var cm corev1.ConfigMap
			if err := persistent.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cm-0"}, &cm); err != nil || cm.Annotations["stamp"] != c.transformVersion {
				t.Errorf("%s: stored object stamped %q (%v), want %q", c.name, cm.Annotations["stamp"], err, c.transformVersion)
			}
		}
		if lists := reqs.List("configmaps"); (lists > 0) != c.wantLists {
			t.Errorf("%s: %d LISTs of configmaps; want a LIST: %v", c.name, lists, c.wantLists)
		}
		persistent.stop()
		reference.stop()
	}
}
