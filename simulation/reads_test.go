package simulation

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Every read a user makes of an informer is checked at every settled point
// against the server's objects: the indexer's Get, GetByKey, List,
// ListKeys, ByIndex, IndexKeys, Index and ListIndexFuncValues, and the
// typed Pod lister a user builds on the indexer. The same checks run on
// client-go's indexer in the differential mode, which shows that they ask
// only what client-go answers.

// The indexes every informer of a run has. Their functions never change,
// so a warm start finds the stored indexes' identities unchanged.
const (
	indexGen  = "gen"  // the label every change sets anew
	indexTier = "tier" // multi-valued: the tier label and a shared value
	indexNote = "note" // the note annotation, which content may make longer than 32 KiB
)

func simIndexers() cache.Indexers {
	return cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		indexGen:             genIndex,
		indexTier:            tierIndex,
		indexNote:            noteIndex,
	}
}

func genIndex(obj interface{}) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("gen index of a %T", obj)
	}
	if v, ok := p.Labels["gen"]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// tierIndex gives a tiered object two values, so that one value names
// several objects and one object is found under several values.
func tierIndex(obj interface{}) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("tier index of a %T", obj)
	}
	if v, ok := p.Labels["tier"]; ok {
		return []string{v, "tiered"}, nil
	}
	return nil, nil
}

func noteIndex(obj interface{}) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("note index of a %T", obj)
	}
	if v, ok := p.Annotations["note"]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// Pods returns the server's current objects by key. They are never
// mutated once written, so they are shared.
func (s *Server) Pods() map[string]*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.objs)
}

// samePod reports whether got is want as a reader sees it: identity,
// version, labels and annotations (content that needs escaping or is
// large lives there).
func samePod(got interface{}, want *corev1.Pod) string {
	p, ok := got.(*corev1.Pod)
	switch {
	case !ok:
		return fmt.Sprintf("a %T", got)
	case p.Namespace != want.Namespace || p.Name != want.Name:
		return fmt.Sprintf("%s/%s", p.Namespace, p.Name)
	case p.UID != want.UID || p.ResourceVersion != want.ResourceVersion:
		return fmt.Sprintf("%s@%s, server has %s@%s", p.UID, p.ResourceVersion, want.UID, want.ResourceVersion)
	case !maps.Equal(p.Labels, want.Labels):
		return fmt.Sprintf("labels %s, server has %s", short(p.Labels), short(want.Labels))
	case !maps.Equal(p.Annotations, want.Annotations):
		return fmt.Sprintf("annotations %s, server has %s", short(p.Annotations), short(want.Annotations))
	}
	return ""
}

// short renders a map with long values cut, for failure messages.
func short(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if len(v) > 40 {
			v = fmt.Sprintf("%s...(%d bytes)", v[:20], len(v))
		}
		parts = append(parts, k+"="+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// readChecker compares one indexer's reads with the server's objects.
type readChecker struct {
	idx  cache.Indexer
	want map[string]*corev1.Pod
	// values[index][value] is the keys the index maps value to, computed
	// with the index functions from the server's objects.
	values map[string]map[string][]string
	errs   []string
}

func (c *readChecker) fail(format string, args ...any) {
	if len(c.errs) < 8 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

// call runs read, turning a panic (List, ListKeys and ListIndexFuncValues
// panic on a read error, as documented) into a failure; any other panic
// goes on.
func (c *readChecker) call(what string, read func()) {
	defer func() {
		if p := recover(); p != nil {
			repanicUndocumented(p)
			c.fail("%s panicked: %v", what, p)
		}
	}()
	read()
}

// checkReads checks every read of idx against want, the server's objects;
// absent are keys the server does not hold. It returns "" if all agree.
func checkReads(idx cache.Indexer, want map[string]*corev1.Pod, absent []string) string {
	c := &readChecker{idx: idx, want: want, values: map[string]map[string][]string{}}
	for name, fn := range simIndexers() {
		vs := map[string][]string{}
		for key, p := range want {
			got, _ := fn(p)
			for _, v := range got {
				vs[v] = append(vs[v], key)
			}
		}
		for v := range vs {
			sort.Strings(vs[v])
		}
		c.values[name] = vs
	}
	keys := slices.Sorted(maps.Keys(want))

	c.call("ListKeys", func() {
		if got := sorted(idx.ListKeys()); !slices.Equal(got, keys) {
			c.fail("ListKeys = %v, server has %v", got, keys)
		}
	})
	c.call("List", func() { c.objects("List", idx.List(), keys) })
	for _, key := range keys {
		c.call("GetByKey "+key, func() {
			got, exists, err := idx.GetByKey(key)
			c.one("GetByKey("+key+")", got, exists, err, want[key])
		})
		ns, name := splitKey(key)
		c.call("Get "+key, func() {
			got, exists, err := idx.Get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			c.one("Get("+key+")", got, exists, err, want[key])
		})
	}
	for _, key := range absent {
		c.call("GetByKey "+key, func() {
			if got, exists, err := idx.GetByKey(key); exists || err != nil {
				c.fail("GetByKey(%s) of a key the server lacks = %v, %v, %v", key, describe(got), exists, err)
			}
		})
	}
	if got := idx.GetIndexers(); len(got) < len(c.values) {
		c.fail("GetIndexers has %v", slices.Sorted(maps.Keys(got)))
	}
	for _, name := range slices.Sorted(maps.Keys(c.values)) {
		c.index(name)
	}
	c.lister(keys, absent)
	return strings.Join(c.errs, "; ")
}

// one checks a single-object read.
func (c *readChecker) one(what string, got interface{}, exists bool, err error, want *corev1.Pod) {
	switch {
	case err != nil:
		c.fail("%s failed: %v", what, err)
	case !exists:
		c.fail("%s: missing, server has %s@%s", what, want.UID, want.ResourceVersion)
	default:
		if d := samePod(got, want); d != "" {
			c.fail("%s: %s", what, d)
		}
	}
}

// objects checks a read returning objects: exactly wantKeys, each as the
// server has it.
func (c *readChecker) objects(what string, got []interface{}, wantKeys []string) {
	var gotKeys []string
	for _, o := range got {
		p, ok := o.(*corev1.Pod)
		if !ok {
			c.fail("%s returned a %T", what, o)
			return
		}
		key := p.Namespace + "/" + p.Name
		gotKeys = append(gotKeys, key)
		if w, ok := c.want[key]; ok {
			if d := samePod(p, w); d != "" {
				c.fail("%s: %s: %s", what, key, d)
			}
		}
	}
	if gotKeys = sorted(gotKeys); !slices.Equal(gotKeys, wantKeys) {
		c.fail("%s = %v, server has %v", what, gotKeys, wantKeys)
	}
}

// index checks one index's reads: its values, each value's keys and
// objects, a value no object has, and Index for each object.
func (c *readChecker) index(name string) {
	vs := c.values[name]
	values := slices.Sorted(maps.Keys(vs))
	c.call("ListIndexFuncValues "+name, func() {
		if got := sorted(c.idx.ListIndexFuncValues(name)); !slices.Equal(got, values) {
			c.fail("ListIndexFuncValues(%s) = %v, server's objects give %v", name, shortValues(got), shortValues(values))
		}
	})
	probe := append(slices.Clone(values), "never-indexed")
	if name == cache.NamespaceIndex {
		// Namespaces whose names are prefixes of others' (a, a-1).
		probe = append(probe, "a", "a-", "b", "zz")
	}
	for _, v := range probe {
		what := fmt.Sprintf("%s=%s", name, shortValue(v))
		c.call("IndexKeys "+what, func() {
			got, err := c.idx.IndexKeys(name, v)
			if err != nil {
				c.fail("IndexKeys(%s) failed: %v", what, err)
				return
			}
			if got = sorted(got); !slices.Equal(got, vs[v]) {
				c.fail("IndexKeys(%s) = %v, server's objects give %v", what, got, vs[v])
			}
		})
		c.call("ByIndex "+what, func() {
			got, err := c.idx.ByIndex(name, v)
			if err != nil {
				c.fail("ByIndex(%s) failed: %v", what, err)
				return
			}
			c.objects("ByIndex("+what+")", got, vs[v])
		})
	}
	fn := simIndexers()[name]
	for _, key := range slices.Sorted(maps.Keys(c.want)) {
		p := c.want[key]
		own, _ := fn(p)
		if len(own) == 0 {
			continue
		}
		wantKeys := map[string]bool{}
		for _, v := range own {
			for _, k := range vs[v] {
				wantKeys[k] = true
			}
		}
		c.call("Index "+name+" "+key, func() {
			got, err := c.idx.Index(name, p)
			if err != nil {
				c.fail("Index(%s, %s) failed: %v", name, key, err)
				return
			}
			c.objects(fmt.Sprintf("Index(%s, %s)", name, key), got, slices.Sorted(maps.Keys(wantKeys)))
		})
		break // one object per index: Index is ByIndex over its values
	}
}

// lister checks the typed Pod lister a user builds on the indexer.
func (c *readChecker) lister(keys, absent []string) {
	l := listers.NewPodLister(c.idx)
	c.call("PodLister.List", func() {
		got, err := l.List(labels.Everything())
		if err != nil {
			c.fail("PodLister.List failed: %v", err)
			return
		}
		c.objects("PodLister.List", podsOf(got), keys)
	})
	for _, v := range slices.Sorted(maps.Keys(c.values[indexGen])) {
		sel := labels.SelectorFromSet(labels.Set{"gen": v})
		c.call("PodLister.List gen="+v, func() {
			got, err := l.List(sel)
			if err != nil {
				c.fail("PodLister.List(gen=%s) failed: %v", v, err)
				return
			}
			c.objects("PodLister.List(gen="+v+")", podsOf(got), c.values[indexGen][v])
		})
	}
	namespaces := map[string]bool{"a": true, "a-1": true, "b": true, "zz": true}
	for _, key := range keys {
		ns, _ := splitKey(key)
		namespaces[ns] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		c.call("PodLister.Pods("+ns+").List", func() {
			got, err := l.Pods(ns).List(labels.Everything())
			if err != nil {
				c.fail("PodLister.Pods(%s).List failed: %v", ns, err)
				return
			}
			c.objects("PodLister.Pods("+ns+").List", podsOf(got), c.values[cache.NamespaceIndex][ns])
		})
	}
	for _, key := range keys {
		ns, name := splitKey(key)
		c.call("PodLister.Get "+key, func() {
			got, err := l.Pods(ns).Get(name)
			c.one("PodLister.Pods("+ns+").Get("+name+")", got, err == nil, err, c.want[key])
		})
	}
	for _, key := range absent {
		ns, name := splitKey(key)
		c.call("PodLister.Get "+key, func() {
			if got, err := l.Pods(ns).Get(name); !apierrors.IsNotFound(err) {
				c.fail("PodLister.Pods(%s).Get(%s) of a key the server lacks = %v, %v; want NotFound", ns, name, describe(got), err)
			}
		})
	}
}

// absentKeys returns keys the server does not hold for reads to miss:
// every schedule key it lacks, and keys one character off those it holds.
func absentKeys(want map[string]*corev1.Pod) []string {
	set := map[string]bool{"zz/none": true}
	for _, k := range slices.Concat(keys, richKeys) {
		set[k] = true
	}
	for k := range want {
		set[k+"x"] = true
		set[k[:len(k)-1]] = true
	}
	for k := range want {
		delete(set, k)
	}
	return slices.Sorted(maps.Keys(set))
}

func podsOf(ps []*corev1.Pod) []interface{} {
	out := make([]interface{}, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func describe(obj interface{}) string {
	if p, ok := obj.(*corev1.Pod); ok && p != nil {
		return fmt.Sprintf("%s/%s %s@%s", p.Namespace, p.Name, p.UID, p.ResourceVersion)
	}
	return fmt.Sprintf("%v", obj)
}

func shortValue(v string) string {
	if len(v) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", v[:20], len(v))
	}
	return v
}

func shortValues(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = shortValue(v)
	}
	return out
}

// checkSettled runs the checks of a settled point beyond the store's and
// the handlers' views: the file's commits succeed (the changes applied reach
// the file), the checkpoint model learns what the store deleted,
// every read of ours (and of client-go's) is checked, a byte-bounded cache
// keeps its bound and its hot entries, and the differential compares.
func (d *driver) checkSettled() error {
	if err := d.db.Err(); err != nil {
		return fmt.Errorf("commits fail: %w", err)
	}
	d.model.settled()
	pods := d.srv.Pods()
	absent := absentKeys(pods)
	if s := checkReads(d.inf.GetIndexer(), pods, absent); s != "" {
		return fmt.Errorf("reads differ from the server: %s", s)
	}
	if err := d.checkCacheBytes(pods); err != nil {
		return err
	}
	return d.diffSettled(pods, absent)
}

// checkCacheBytes checks a byte-bounded cache: it holds at most its bound,
// and reading an object larger than the bound (which cannot be cached)
// evicts none of the small objects read just before.
func (d *driver) checkCacheBytes(pods map[string]*corev1.Pod) error {
	if d.cfg.CacheBytes == 0 {
		return nil
	}
	coll := d.inf.Indexer().Collection()
	if st := coll.CacheStats(); st.Bytes > d.cfg.CacheBytes {
		return fmt.Errorf("bounded cache holds %d bytes, bound %d", st.Bytes, d.cfg.CacheBytes)
	}
	var big, small []string
	for _, k := range slices.Sorted(maps.Keys(pods)) {
		size := 0
		for _, v := range pods[k].Annotations {
			size += len(v)
		}
		switch {
		case int64(size) > d.cfg.CacheBytes:
			big = append(big, k)
		case size < 1<<10:
			small = append(small, k)
		}
	}
	if len(big) == 0 || len(small) == 0 {
		return nil
	}
	idx := d.inf.GetIndexer()
	for range 2 {
		for _, k := range small {
			_, _, _ = idx.GetByKey(k)
		}
	}
	before := coll.CacheStats().Objects
	for _, k := range big {
		_, _, _ = idx.GetByKey(k)
	}
	if after := coll.CacheStats().Objects; after < before {
		return fmt.Errorf("bounded cache: reading %d objects larger than CacheBytes (%d) evicted %d of the %d small objects cached", len(big), d.cfg.CacheBytes, before-after, before)
	}
	return nil
}
