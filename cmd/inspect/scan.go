package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// scanOptions select the objects of a collection.
type scanOptions struct {
	// namespace keeps objects of that namespace, and cluster-scoped ones
	// (as kubectl ignores -n for cluster-scoped resources). "" keeps all.
	namespace string
	// names keeps objects with any of these names.
	names []string
	// selector keeps objects whose labels match; nil keeps all.
	selector labels.Selector
	// progress counts every record read.
	progress *progress
}

// undecodable is a record scan skipped.
type undecodable struct {
	key string
	err error
}

// scan calls fn for each selected object of c, in key order, and returns
// how many it selected and the records it could not decode. It first reads
// only records whose key (namespace/name) can match; if that selects
// nothing it reads them all, for collections with other keys.
func (f *cacheFile) scan(c *collection, opts scanOptions, fn func(*object) error) (int, []undecodable, error) {
	keyMatch := func(key string) bool {
		ns, name, namespaced := strings.Cut(key, "/")
		if !namespaced {
			name = ns
		}
		if opts.namespace != "" && namespaced && ns != opts.namespace {
			return false
		}
		if len(opts.names) == 0 {
			return true
		}
		for _, n := range opts.names {
			if n == name {
				return true
			}
		}
		return false
	}
	if _, ok := c.Indexes[cache.NamespaceIndex]; ok && opts.namespace != "" {
		return f.scanNamespace(c, opts, keyMatch, fn)
	}
	n, bad, err := f.scanPass(c, opts, keyMatch, fn)
	if err == nil && n == 0 && (opts.namespace != "" || len(opts.names) > 0) {
		return f.scanPass(c, opts, nil, fn)
	}
	return n, bad, err
}

// scanNamespace is scan through the collection's namespace index (client-go's
// cache.NamespaceIndex, which informers' listers use): it reads only the
// records of the namespace and of cluster-scoped objects (indexed under ""),
// however large the collection.
func (f *cacheFile) scanNamespace(c *collection, opts scanOptions, keyMatch func(string) bool, fn func(*object) error) (int, []undecodable, error) {
	coll, err := f.db.Collection(c.Name, persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		return 0, nil, err
	}
	var keys []string
	for _, ns := range []string{opts.namespace, ""} {
		k, err := coll.IndexKeys(cache.NamespaceIndex, ns)
		if err != nil {
			return 0, nil, err
		}
		keys = append(keys, k...)
	}
	sort.Strings(keys)
	matched := 0
	var bad []undecodable
	err = f.file.View(c.Name, func(r *inspectfile.Collection) error {
		next := 0
		return f.decodeRecords(c, func(yield func(key string, rec []byte) error) error {
			for ; next < len(keys); next++ {
				key := keys[next]
				opts.progress.add(1)
				if !keyMatch(key) {
					continue
				}
				rec, err := r.Record(key)
				if err != nil {
					return err
				}
				if rec == nil {
					bad = append(bad, undecodable{key, fmt.Errorf("indexed under namespace %q but not stored (run 'inspect verify')", opts.namespace)})
					continue
				}
				if err := yield(key, rec); err != nil {
					return err
				}
			}
			return nil
		}, nil, func(key string, _ []byte, o *object, err error) error {
			if err != nil {
				bad = append(bad, undecodable{key, err})
				return nil
			}
			if !opts.selects(o) {
				return nil
			}
			matched++
			return fn(o)
		})
	})
	return matched, bad, err
}

func (f *cacheFile) scanPass(c *collection, opts scanOptions, keyMatch func(string) bool, fn func(*object) error) (int, []undecodable, error) {
	matched := 0
	var bad []undecodable
	keep := func(key string) bool {
		opts.progress.add(1)
		return keyMatch == nil || keyMatch(key)
	}
	err := f.file.View(c.Name, func(r *inspectfile.Collection) error {
		return f.decodeRecords(c, r.ForEachRecord, keep, func(key string, _ []byte, o *object, err error) error {
			if err != nil {
				bad = append(bad, undecodable{key, err})
				return nil
			}
			if !opts.selects(o) {
				return nil
			}
			matched++
			return fn(o)
		})
	})
	return matched, bad, err
}

// decodeBatch is how many records decodeRecords decodes in parallel at a time.
const decodeBatch = 512

// decodeRecords decodes the records that records yields (in key order) for
// which keep (if not nil)
// returns true, using every CPU, and calls fn for each in key order from the
// calling goroutine, with the record (valid until fn returns) and the
// decoded object or the decoding error. Decoding dominates reading large
// files, and protobuf decoding scales with cores.
func (f *cacheFile) decodeRecords(c *collection, records func(yield func(key string, rec []byte) error) error, keep func(key string) bool, fn func(key string, rec []byte, o *object, err error) error) error {
	type item struct {
		key string
		rec []byte
		o   *object
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	items := make([]item, 0, decodeBatch)
	flush := func() error {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range min(workers, len(items)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < len(items); i = int(next.Add(1) - 1) {
					items[i].o, items[i].err = f.decode(c, items[i].key, items[i].rec)
				}
			}()
		}
		wg.Wait()
		for _, it := range items {
			if err := fn(it.key, it.rec, it.o, it.err); err != nil {
				return err
			}
		}
		items = items[:0]
		return nil
	}
	err := records(func(key string, rec []byte) error {
		if keep != nil && !keep(key) {
			return nil
		}
		items = append(items, item{key: key, rec: rec})
		if len(items) == decodeBatch {
			return flush()
		}
		return nil
	})
	if err == nil && len(items) > 0 {
		err = flush()
	}
	return err
}

func (opts scanOptions) selects(o *object) bool {
	if ns := o.Namespace(); opts.namespace != "" && ns != "" && ns != opts.namespace {
		return false
	}
	if len(opts.names) > 0 {
		found := false
		for _, n := range opts.names {
			found = found || n == o.Name()
		}
		if !found {
			return false
		}
	}
	return opts.selector == nil || opts.selector.Matches(labels.Set(o.Labels()))
}

// warnUndecodable tells the user which records were skipped.
func warnUndecodable(errOut io.Writer, c *collection, bad []undecodable) {
	if len(bad) == 0 {
		return
	}
	unknown := 0
	for _, b := range bad {
		if errors.Is(b.err, persist.ErrUnknownType) {
			unknown++
		}
	}
	fmt.Fprintf(errOut, "Warning: skipped %d record(s) of collection %q that could not be decoded", len(bad), c.Name)
	if unknown > 0 {
		fmt.Fprintf(errOut, " (%d of a type inspect's scheme does not know)", unknown)
	}
	fmt.Fprintf(errOut, "; first: key %q: %v. Run 'inspect verify' for all of them.\n", bad[0].key, bad[0].err)
}
