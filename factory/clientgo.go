// Reaches into k8s.io/client-go tools/cache/shared_informer.go at v0.37.2:
// the unexported fields of sharedIndexInformer (listerWatcher, objectType,
// objectDescription, defaultEventHandlerResyncPeriod, transform, identifier,
// informerMetricsProvider, watchErrorHandler, started, processor), of
// sharedProcessor (listeners) and of processorListener (handler,
// requestedResyncPeriod, logger), read through reflect.NewAt; and the
// SharedIndexInformer embedded in the unexported typedSharedIndexInformer[T],
// read to unwrap and set to rewrap.
// Reaches into k8s.io/client-go tools/cache/listwatch.go at v0.37.2:
// the ListWatch embedded in the unexported
// listWatcherWithWatchListSemanticsWrapper, read.
//
// There is no public hook to use instead. client-go v0.37.2's informers have
// getters for none of these but the indexers (GetIndexer().GetIndexers(),
// used). Its SharedIndexInformerOptions only go in. An informer of
// client-go's tools/cache may lack these fields, when client-go's layout
// changed. InformerFor then runs newFunc's informer in memory. It reports
// that as an error, and in boltinformer_factory_fallbacks_total with reason
// client-go-layout (fallback.go). TestCaptureReadsClientGoInformer pins the
// fields of the client-go in use. TestInformerForReportsClientGoLayout pins
// the report.

package factory

import (
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// InformerFor is handed a newFunc that builds a client-go informer. It
// serves, persistently, what that informer would. client-go has no getters
// for most of what newFunc sets on the informer. That covers its
// ListerWatcher, transform, resync period, watch error handler and the
// handlers it registered. So this file reads them from client-go v0.37.2's
// sharedIndexInformer, and a test pins the fields.
//
// Any other informer implementation, or another layout, is not understood.
// InformerFor then returns newFunc's informer itself, in memory, as
// client-go's factory does. Another layout of client-go's own informer is
// errClientGoLayout, which InformerFor reports as an error. The persistent
// informer is returned inside the same client-go typed wrappers as
// newFunc's (rewrap).

const clientGoCachePkg = "k8s.io/client-go/tools/cache"

// clientGoVersion is the client-go whose private fields this file reads
// (hack/upstream-versions.txt checks it against go.mod).
const clientGoVersion = "v0.37.2"

var (
	// errClientGoLayout marks an informer of client-go's tools/cache whose
	// private state is not client-go v0.37.2's. client-go's layout changed.
	errClientGoLayout = errors.New("not client-go " + clientGoVersion + "'s informer layout")
	// errNotClientGo marks an informer that is not client-go's.
	errNotClientGo = errors.New("not client-go's shared informer")
)

// clientGoParts is everything observable that newFunc set on the informer
// it built, which the persistent informer must do the same way.
type clientGoParts struct {
	example       runtime.Object
	listerWatcher cache.ListerWatcher
	// resync is the informer's default handler resync period (newFunc may
	// choose its own rather than the one passed to it).
	resync            time.Duration
	indexers          cache.Indexers
	transform         cache.TransformFunc
	description       string
	identifier        cache.InformerNameAndResource
	metricsProvider   cache.InformerMetricsProvider
	watchErrorHandler cache.WatchErrorHandlerWithContext
	handlers          []registeredHandler
}

// registeredHandler is a handler newFunc registered on its informer, with
// the options it was registered with.
type registeredHandler struct {
	handler cache.ResourceEventHandler
	// resync is the period the handler asked for (after client-go's
	// minimum), which the persistent informer adjusts by the same rules.
	resync time.Duration
	logger klog.Logger
}

// readClientGoInformer returns what newFunc set on informer, which must be
// client-go's sharedIndexInformer, directly or inside typed wrappers, and
// not started.
func readClientGoInformer(informer cache.SharedIndexInformer) (clientGoParts, error) {
	inner, err := clientGoInformer(informer)
	if err != nil {
		return clientGoParts{}, err
	}
	p, err := readSharedIndexInformer(inner)
	if err != nil {
		return clientGoParts{}, fmt.Errorf("%T: %w", informer, err)
	}
	p.indexers = informer.GetIndexer().GetIndexers()
	return p, nil
}

// readSharedIndexInformer returns what readClientGoInformer does, but the
// indexers, from v, a client-go sharedIndexInformer (addressable). Fields it
// cannot read are errClientGoLayout.
func readSharedIndexInformer(v reflect.Value) (clientGoParts, error) {
	var p clientGoParts
	var missing []string
	readField(v, "listerWatcher", &p.listerWatcher, &missing)
	readField(v, "transform", &p.transform, &missing)
	readField(v, "defaultEventHandlerResyncPeriod", &p.resync, &missing)
	readField(v, "objectType", &p.example, &missing)
	readField(v, "objectDescription", &p.description, &missing)
	readField(v, "identifier", &p.identifier, &missing)
	readField(v, "informerMetricsProvider", &p.metricsProvider, &missing)
	readField(v, "watchErrorHandler", &p.watchErrorHandler, &missing)
	var started bool
	readField(v, "started", &started, &missing)
	if len(missing) > 0 {
		return clientGoParts{}, fmt.Errorf("sharedIndexInformer has no field %s of %s's type: %w", strings.Join(missing, ", "), clientGoVersion, errClientGoLayout)
	}
	if p.listerWatcher == nil || p.example == nil {
		return clientGoParts{}, errors.New("it has no ListerWatcher or example object")
	}
	if started {
		return clientGoParts{}, errors.New("newFunc's informer has already started")
	}
	var err error
	p.handlers, err = registeredHandlers(v)
	if err != nil {
		return clientGoParts{}, fmt.Errorf("%w: %w", err, errClientGoLayout)
	}
	return p, nil
}

// registeredHandlers returns the handlers registered on the client-go
// sharedIndexInformer v (and not removed). client-go keeps them in a map,
// so they come in no particular order. client-go hands each its own
// goroutine and buffer, so their order was never observable.
func registeredHandlers(v reflect.Value) ([]registeredHandler, error) {
	proc := unexportedValue(v, "processor")
	if !proc.IsValid() || proc.Kind() != reflect.Pointer || proc.IsNil() || proc.Elem().Kind() != reflect.Struct {
		return nil, errors.New("no sharedProcessor")
	}
	listeners := unexportedValue(proc.Elem(), "listeners")
	if !listeners.IsValid() || listeners.Kind() != reflect.Map {
		return nil, errors.New("no processor listeners")
	}
	var out []registeredHandler
	for iter := listeners.MapRange(); iter.Next(); {
		l := iter.Key()
		if l.Kind() != reflect.Pointer || l.IsNil() || l.Elem().Kind() != reflect.Struct {
			return nil, errors.New("unexpected processor listener")
		}
		var h registeredHandler
		var missing []string
		readField(l.Elem(), "handler", &h.handler, &missing)
		readField(l.Elem(), "requestedResyncPeriod", &h.resync, &missing)
		readField(l.Elem(), "logger", &h.logger, &missing)
		if len(missing) > 0 || h.handler == nil {
			return nil, fmt.Errorf("processorListener without a handler, or with no field %s of %s's type", strings.Join(missing, ", "), clientGoVersion)
		}
		out = append(out, h)
	}
	return out, nil
}

// register adds p's watch error handler and handlers to informer, which has
// not started, as newFunc added them to its own.
func (p clientGoParts) register(informer cache.SharedIndexInformer) error {
	if p.watchErrorHandler != nil {
		if err := informer.SetWatchErrorHandlerWithContext(p.watchErrorHandler); err != nil {
			return fmt.Errorf("boltinformer factory: newFunc's watch error handler: %w", err)
		}
	}
	for _, h := range p.handlers {
		if _, err := informer.AddEventHandlerWithOptions(h.handler, cache.HandlerOptions{Logger: &h.logger, ResyncPeriod: &h.resync}); err != nil {
			return fmt.Errorf("boltinformer factory: a handler newFunc registered: %w", err)
		}
	}
	return nil
}

// clientGoInformer returns the client-go sharedIndexInformer that informer
// is, or wraps in client-go's typed wrappers at any depth. A
// typedSharedIndexInformer embeds the informer it wraps and only adds typed
// variants of its methods. Other wrappers may change behaviour, so they are
// not looked through and are errNotClientGo. A type of client-go's
// tools/cache that is neither is errClientGoLayout. So is a typed wrapper
// without its embedded informer. v0.37.2 has no other SharedIndexInformer.
func clientGoInformer(informer cache.SharedIndexInformer) (reflect.Value, error) {
	v := reflect.ValueOf(informer)
	seen := map[uintptr]bool{}
	for v.IsValid() && v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct && !seen[v.Pointer()] {
		seen[v.Pointer()] = true
		t := v.Elem().Type()
		if t.PkgPath() != clientGoCachePkg {
			break
		}
		if t.Name() == "sharedIndexInformer" {
			return v.Elem(), nil
		}
		f := v.Elem().FieldByName("SharedIndexInformer")
		if !strings.HasPrefix(t.Name(), "typedSharedIndexInformer[") || !f.IsValid() || f.Type() != reflect.TypeFor[cache.SharedIndexInformer]() {
			return reflect.Value{}, fmt.Errorf("%T: %s.%s: %w", informer, clientGoCachePkg, t.Name(), errClientGoLayout)
		}
		embedded, ok := f.Interface().(cache.SharedIndexInformer)
		if !ok {
			break // a typed wrapper of nothing
		}
		v = reflect.ValueOf(embedded)
	}
	return reflect.Value{}, fmt.Errorf("%T is %w", informer, errNotClientGo)
}

// rewrap returns informer inside the same chain of client-go typed
// wrappers as like, which is what newFunc returned. So a caller's type
// assertion to cache.TypedSharedIndexInformer[T] on what InformerFor returns
// succeeds. It succeeds on client-go's factory too, which returns newFunc's
// informer. clientGoInformer has accepted like, so every layer above the
// sharedIndexInformer is a *typedSharedIndexInformer[T].
func rewrap(informer, like cache.SharedIndexInformer) cache.SharedIndexInformer {
	var layers []reflect.Type
	for v := reflect.ValueOf(like); v.Elem().Type().Name() != "sharedIndexInformer"; {
		layers = append(layers, v.Type())
		v = reflect.ValueOf(v.Elem().FieldByName("SharedIndexInformer").Interface())
	}
	for i := len(layers) - 1; i >= 0; i-- {
		w := reflect.New(layers[i].Elem())
		w.Elem().FieldByName("SharedIndexInformer").Set(reflect.ValueOf(informer))
		informer = w.Interface().(cache.SharedIndexInformer)
	}
	return informer
}

// requestOnlyCode is the client-go code whose ListerWatchers only set list
// options and send the request. The options come from the tweak, or the
// options modifier, they are given. What they list is exactly the request.
// The code is the generated typed informers' package tree, and
// cache.NewFilteredListWatchFromClient, which cache.NewListWatchFromClient
// calls.
var requestOnlyCode = []string{
	"k8s.io/client-go/informers/",
	"k8s.io/client-go/tools/cache.NewFilteredListWatchFromClient.",
}

// listerWatcherCode identifies the Go code of lw. For a cache.ListWatch,
// alone or in the wrapper client-go's generated informers put it in, that is
// the names of its functions. For anything else it is lw's type.
// requestOnly reports that every one of its functions is requestOnlyCode.
// What lw lists is then exactly the request it sends. Otherwise it may
// filter or rewrite objects in Go. A function written elsewhere, or inlined
// into other code, is named after that code. So requestOnly is never true
// of code outside client-go. At worst, client-go's own code is taken for
// custom code.
func listerWatcherCode(lw cache.ListerWatcher) (code string, requestOnly bool) {
	v := reflect.ValueOf(lw)
	outer := fmt.Sprintf("%T", lw)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct &&
		v.Elem().Type().PkgPath() == clientGoCachePkg && v.Elem().Type().Name() == "listWatcherWithWatchListSemanticsWrapper" {
		if inner, ok := v.Elem().FieldByName("ListWatch").Interface().(*cache.ListWatch); ok && inner != nil {
			lw = inner
		}
	}
	plain, ok := lw.(*cache.ListWatch)
	if !ok || plain == nil {
		return outer, false
	}
	var names []string
	requestOnly = true
	for _, fn := range []struct {
		field string
		fn    interface{}
	}{
		//lint:ignore SA1019 a ListerWatcher may still set only the deprecated functions, and they are its code
		{"ListFunc", plain.ListFunc},
		//lint:ignore SA1019 as ListFunc
		{"WatchFunc", plain.WatchFunc},
		{"ListWithContextFunc", plain.ListWithContextFunc},
		{"WatchFuncWithContext", plain.WatchFuncWithContext},
	} {
		name := funcName(fn.fn)
		if name == "" {
			continue
		}
		names = append(names, fn.field+"="+name)
		requestOnly = requestOnly && slices.ContainsFunc(requestOnlyCode, func(prefix string) bool { return strings.HasPrefix(name, prefix) })
	}
	return outer + "{" + strings.Join(names, ",") + "}", requestOnly && len(names) > 0
}

// funcName is fn's Go name, spelled as package cache spells the functions
// it records: "" for nil or what is not a function, "?" if the runtime does
// not know it. List identities stored in cache files hold these names, so a
// change of spelling starts every custom ListerWatcher's collection cold.
func funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	if f := goruntime.FuncForPC(v.Pointer()); f != nil {
		return f.Name()
	}
	return "?"
}

// readField sets *dst to the field name of the addressable struct v, or adds
// name to *missing if v has no such field of type T.
func readField[T any](v reflect.Value, name string, dst *T, missing *[]string) {
	f, ok := unexportedField[T](v, name)
	if !ok {
		*missing = append(*missing, name)
		return
	}
	*dst = f
}

// unexportedField reads the field name of the addressable struct v, if it
// exists with type T. It is read before the informer has started, so no
// lock of the informer's guards it.
func unexportedField[T any](v reflect.Value, name string) (T, bool) {
	var zero T
	f := unexportedValue(v, name)
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() {
		return zero, false
	}
	out, _ := f.Interface().(T) // a nil interface field is T's zero value
	return out, true
}

// unexportedValue returns the field name of the addressable struct v,
// readable although unexported. The value is invalid if there is none.
func unexportedValue(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// PersistentIndexer returns the persistent indexer behind an informer a
// factory built. It looks through client-go's typed wrappers at any depth.
// The generated accessors' Informer() returns such a wrapper. InformerFor
// returns the persistent informer in the wrappers newFunc's informer was in.
// It returns nil for an informer kept in memory. Informers of MemoryOnly
// resources, and of Secrets without PersistSecrets, are kept in memory. So
// are client-go informers that InformerFor could not take over (see
// boltinformer_factory_fallbacks_total).
func PersistentIndexer(informer cache.SharedIndexInformer) *bcache.Indexer {
	for informer != nil {
		if bi, ok := informer.(*bcache.Informer); ok {
			return bi.Indexer()
		}
		v := reflect.ValueOf(informer)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		f := v.Elem().FieldByName("SharedIndexInformer")
		if !f.IsValid() {
			return nil
		}
		informer, _ = f.Interface().(cache.SharedIndexInformer)
	}
	return nil
}
