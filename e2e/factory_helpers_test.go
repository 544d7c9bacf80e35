package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// This file holds what the factory tests (factory_*_test.go) share.

// factoryTestTimeout bounds each factory test's own waits.
const factoryTestTimeout = 2 * time.Minute

// apiCounter counts requests per resource: lists and watches of a
// resource's collection (in any namespace), and writes (POST, PUT, PATCH,
// DELETE) to the resource or its objects. A list is a LIST request or a
// watch-list, the WATCH with sendInitialEvents=true that client-go's
// reflector streams a list with by default; both make the server send every
// object. A consistent read of one object (limit=1 at resourceVersion "",
// what a caught-up sync takes) is a probe, not a list, as in
// requestCounter. Unlike requestCounter it tells resources apart, so one
// client can be checked for several.
type apiCounter struct {
	mu                                        sync.Mutex
	lists, metaLists, watches, probes, writes map[string]int
}

func newAPICounter() *apiCounter {
	return &apiCounter{lists: map[string]int{}, metaLists: map[string]int{}, watches: map[string]int{}, probes: map[string]int{}, writes: map[string]int{}}
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resource, rest := splitAPIPath(req.URL.Path)
		c.mu.Lock()
		switch {
		case resource == "":
		case req.Method == http.MethodGet && len(rest) == 0:
			q := req.URL.Query()
			if w := q.Get("watch"); (w == "true" || w == "1") && q.Get("sendInitialEvents") != "true" {
				c.watches[resource]++
			} else if q.Get("limit") == "1" && q.Get("resourceVersion") == "" && w == "" {
				c.probes[resource]++
			} else if q.Get("resourceVersion") == "" && q.Get("limit") == proofPageSize && strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
				// A consistent metadata list: a small warm collection's
				// proof of catching up (cache/versionproof.go).
				c.metaLists[resource]++
			} else {
				c.lists[resource]++
			}
		case req.Method != http.MethodGet && req.Method != http.MethodHead:
			c.writes[resource]++
		}
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// splitAPIPath returns the resource of an API request path and the segments
// after it (name, subresource):
//
//	/api/v1/pods                              → pods, []
//	/api/v1/namespaces/a/configmaps/x         → configmaps, [x]
//	/apis/example.com/v1/namespaces/a/widgets → widgets, []
//	/api/v1/namespaces/a                      → namespaces, [a]
func splitAPIPath(path string) (string, []string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return "", nil
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	if len(segs) == 0 {
		return "", nil
	}
	return segs[0], segs[1:]
}

func (c *apiCounter) get(m map[string]int, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[resource]
}

func (c *apiCounter) listsOf(resource string) int   { return c.get(c.lists, resource) }
func (c *apiCounter) watchesOf(resource string) int { return c.get(c.watches, resource) }
func (c *apiCounter) probesOf(resource string) int  { return c.get(c.probes, resource) }
func (c *apiCounter) writesOf(resource string) int  { return c.get(c.writes, resource) }

// countedConfig returns a copy of cfg (protobuf if typed) whose requests
// counter counts, when counter is not nil.
func countedConfig(cfg *rest.Config, typed bool, counter *apiCounter) *rest.Config {
	if typed {
		cfg = protobuf(cfg)
	} else {
		cfg = rest.CopyConfig(cfg)
	}
	if counter != nil {
		cfg.Wrap(counter.wrap)
	}
	return cfg
}

// typedClient returns a protobuf clientset whose requests counter counts.
func typedClient(t testing.TB, cfg *rest.Config, counter *apiCounter) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(countedConfig(cfg, true, counter))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// dynamicClient returns a dynamic client whose requests counter counts.
func dynamicClient(t testing.TB, cfg *rest.Config, counter *apiCounter) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(countedConfig(cfg, false, counter))
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// requirePersistent fails unless informer is a persistent boltinformer
// informer, and returns its indexer.
func requirePersistent(t testing.TB, what string, informer cache.SharedIndexInformer) *bcache.Indexer {
	t.Helper()
	idx := factory.PersistentIndexer(informer)
	if idx == nil {
		t.Fatalf("%s: informer %T does not persist, want boltinformer's persistent informer", what, informer)
	}
	return idx
}

// collectionInfo returns the stored description of the named collection,
// after flushing db, and whether it exists.
func collectionInfo(t testing.TB, db *persist.DB, name string) (persist.CollectionInfo, bool) {
	t.Helper()
	for _, info := range collectionInfos(t, db) {
		if info.Name == name {
			return info, true
		}
	}
	return persist.CollectionInfo{}, false
}

// collectionInfos flushes db and describes its collections.
func collectionInfos(t testing.TB, db *persist.DB) []persist.CollectionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := db.Flush(ctx); err != nil {
		t.Fatalf("flush %s: %v", db.Path(), err)
	}
	infos, err := db.Collections()
	if err != nil {
		t.Fatalf("collections of %s: %v", db.Path(), err)
	}
	return infos
}

// committedRV returns the resourceVersion collection name holds in db's
// file, as committed: no flush first. It reads the file through db, so it
// answers after the informer closed its collection.
func committedRV(t testing.TB, db *persist.DB, name string) string {
	t.Helper()
	infos, err := db.Collections()
	if err != nil {
		t.Fatalf("collections of %s: %v", db.Path(), err)
	}
	for _, info := range infos {
		if info.Name == name {
			return info.ResourceVersion
		}
	}
	t.Fatalf("%s holds no collection %q", db.Path(), name)
	return ""
}

// listState returns the key → resourceVersion map of objs.
func listState[T any](objs []T) state {
	out := state{}
	for _, obj := range objs {
		key, rv := objectKeyRV(obj)
		out[key] = rv
	}
	return out
}
