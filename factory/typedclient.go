package factory

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// InformerFor receives a newFunc that hides its ListerWatcher. So the
// factory rebuilds the one the generated informer would use. It makes the
// same typed client calls, client.<GroupVersion>().<Resources>(namespace)
// .List and .Watch, with the factory's namespace and tweak options. This
// file finds those calls for every type by reflecting over
// kubernetes.Interface once. Every group-version method returns a client.
// That client's resource methods return an interface with
// List(ctx, ListOptions) (*<Kind>List, error). The list's Items element type
// is the object type.

// accessor names the typed-client calls that list and watch one type.
type accessor struct {
	groupVersion string       // kubernetes.Interface method, e.g. "CoreV1"
	resource     string       // group-version client method, e.g. "Pods"
	namespaced   bool         // the resource method takes a namespace
	list         reflect.Type // what List returns, e.g. *v1.PodList
}

var (
	contextType     = reflect.TypeFor[context.Context]()
	listOptionsType = reflect.TypeFor[metav1.ListOptions]()
	errorType       = reflect.TypeFor[error]()
)

var accessors = sync.OnceValue(func() map[reflect.Type]accessor {
	out := map[reflect.Type]accessor{}
	client := reflect.TypeFor[kubernetes.Interface]()
	for i := 0; i < client.NumMethod(); i++ {
		gv := client.Method(i)
		if gv.Type.NumIn() != 0 || gv.Type.NumOut() != 1 || gv.Type.Out(0).Kind() != reflect.Interface {
			continue
		}
		gvClient := gv.Type.Out(0)
		for j := 0; j < gvClient.NumMethod(); j++ {
			res := gvClient.Method(j)
			namespaced := res.Type.NumIn() == 1 && res.Type.In(0).Kind() == reflect.String
			if (res.Type.NumIn() != 0 && !namespaced) || res.Type.NumOut() != 1 || res.Type.Out(0).Kind() != reflect.Interface {
				continue
			}
			objType, listType, ok := listedType(res.Type.Out(0))
			if !ok {
				continue
			}
			out[objType] = accessor{groupVersion: gv.Name, resource: res.Name, namespaced: namespaced, list: listType}
		}
	}
	return out
})

// listedType returns the object type listed by a typed resource client, and
// its list type, if it has the List and Watch methods the generated
// informers use.
func listedType(resourceClient reflect.Type) (obj, list reflect.Type, ok bool) {
	method, ok := resourceClient.MethodByName("List")
	if !ok || method.Type.NumIn() != 2 || method.Type.In(0) != contextType || method.Type.In(1) != listOptionsType ||
		method.Type.NumOut() != 2 || method.Type.Out(1) != errorType {
		return nil, nil, false
	}
	if _, ok := resourceClient.MethodByName("Watch"); !ok {
		return nil, nil, false
	}
	list = method.Type.Out(0)
	if list.Kind() != reflect.Pointer || list.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	items, ok := list.Elem().FieldByName("Items") // upstream-versions: public (a generated list type's Items)
	if !ok || items.Type.Kind() != reflect.Slice || items.Type.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	return reflect.PointerTo(items.Type.Elem()), list, true
}

// accessorFor returns the typed-client calls listing obj's type.
func accessorFor(obj runtime.Object) (accessor, error) {
	acc, ok := accessors()[reflect.TypeOf(obj)]
	if !ok {
		return accessor{}, fmt.Errorf("boltinformer factory: %T is not listed by any typed client of k8s.io/client-go/kubernetes; use the dynamic factory for it", obj)
	}
	return acc, nil
}

// typedListWatch returns a ListerWatcher making, for objects of obj's type,
// the calls the generated informer makes. It fails for a type the typed
// client does not list.
func typedListWatch(client kubernetes.Interface, obj runtime.Object, namespace string, tweak internalinterfaces.TweakListOptionsFunc) (cache.ListerWatcher, error) {
	acc, err := accessorFor(obj)
	if err != nil {
		return nil, err
	}
	resourceClient := func() reflect.Value {
		var args []reflect.Value
		if acc.namespaced {
			args = []reflect.Value{reflect.ValueOf(namespace)}
		}
		gv := reflect.ValueOf(client).MethodByName(acc.groupVersion).Call(nil)[0]
		return gv.MethodByName(acc.resource).Call(args)[0]
	}
	call := func(ctx context.Context, method string, opts metav1.ListOptions) (interface{}, error) {
		if tweak != nil {
			tweak(&opts)
		}
		out := resourceClient().MethodByName(method).Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(opts)})
		if err, _ := out[1].Interface().(error); err != nil {
			return nil, err
		}
		return out[0].Interface(), nil
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := call(ctx, "List", opts)
			if err != nil {
				return nil, err
			}
			return obj.(runtime.Object), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := call(ctx, "Watch", opts)
			if err != nil {
				return nil, err
			}
			return w.(watch.Interface), nil
		},
	}, nil
}
