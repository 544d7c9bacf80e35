package factory

import (
	"context"
	"net/url"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/wire"
)

// A persistent informer stores every object a watch delivers. Marshalling
// the decoded object again for the record is the largest part of what it
// costs beyond client-go's informer. Yet the record's payload is what the
// server sent, the object's own protobuf message. So the factory makes the
// watches of built-in types through a REST client of its own. It is built
// from the clientset's, with the same transport, credentials, user agent,
// URL and rate limiter. Its decoder remembers each object's message
// (internal/wire), and decodes the object from it where it lies in the
// event, without the copy client-go's decoder makes. The informer stores
// that message when no transform changed the object. The list still goes through the clientset.
//
// That client asks for protobuf, with JSON as the fallback. client-go's
// typed clients do the same for built-in types unless their config sets a
// content type. A clientset configured for JSON thus lists in JSON and
// watches in protobuf here, and the objects are the same. Warnings on watch
// responses go to client-go's default warning handler. A clientset that is
// not a real one, such as a fake, watches through its own calls.

// wireListerWatcher returns lw with its Watch made through the group's
// payload-keeping REST client, with req's filters. It does so only if lw is
// client-go's own ListerWatcher for req (requestOnly), so that what it
// watches is the request. The factory's clientset must also be a real one.
// Otherwise it returns lw. f.lock is held.
func (f *Factory) wireListerWatcher(lw cache.ListerWatcher, gvr schema.GroupVersionResource, req listRequest) cache.ListerWatcher {
	if !req.requestOnly {
		return lw
	}
	rc := f.wireClientLocked(gvr.GroupVersion())
	if rc == nil {
		return lw
	}
	inner := cache.ToListerWatcherWithContext(lw)
	namespace := req.namespace
	return &cache.ListWatch{
		ListWithContextFunc: inner.ListWithContext,
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			// As the typed client's Watch (gentype.Client.Watch), with the
			// filters its ListerWatcher adds.
			opts.LabelSelector, opts.FieldSelector = req.options.LabelSelector, req.options.FieldSelector
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			opts.Watch = true
			return rc.Get().NamespaceIfScoped(namespace, namespace != "").Resource(gvr.Resource).
				VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Watch(ctx)
		},
	}
}

// wireClientLocked returns the group-version's payload-keeping REST client,
// built on first use, or nil if the clientset's is not a *rest.RESTClient.
// f.lock is held.
func (f *Factory) wireClientLocked(gv schema.GroupVersion) *rest.RESTClient {
	if rc, ok := f.wireClients[gv]; ok {
		return rc
	}
	rc := newWireClient(f.restClientFor(gv))
	if f.wireClients == nil {
		f.wireClients = map[schema.GroupVersion]*rest.RESTClient{}
	}
	f.wireClients[gv] = rc
	return rc
}

// restClientFor returns the clientset's REST client of gv, or nil.
func (f *Factory) restClientFor(gv schema.GroupVersion) rest.Interface {
	for _, acc := range accessors() {
		gvClient := reflect.ValueOf(f.client).MethodByName(acc.groupVersion)
		if !gvClient.IsValid() {
			continue
		}
		rcMethod := gvClient.Call(nil)[0].MethodByName("RESTClient")
		if !rcMethod.IsValid() {
			continue
		}
		rc, _ := rcMethod.Call(nil)[0].Interface().(rest.Interface)
		if rc != nil && !reflect.ValueOf(rc).IsNil() && rc.APIVersion() == gv {
			return rc
		}
	}
	return nil
}

// newWireClient returns a REST client for the same URL, transport and rate
// limiter as rc. Its response decoders keep each object's protobuf message.
// It returns nil if rc is not a *rest.RESTClient.
func newWireClient(rc rest.Interface) *rest.RESTClient {
	r, ok := rc.(*rest.RESTClient)
	if !ok || r == nil {
		return nil
	}
	u := r.Get().URL() // the server's URL and the group-version's path
	gv := r.APIVersion()
	codecs := wire.NegotiatedSerializer{NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), Creater: scheme.Scheme}
	out, err := rest.NewRESTClient(&url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}, u.Path, rest.ClientContentConfig{
		AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		ContentType:        runtime.ContentTypeProtobuf,
		GroupVersion:       gv,
		Negotiator:         runtime.NewClientNegotiator(codecs, gv),
	}, r.GetRateLimiter(), r.Client)
	if err != nil {
		return nil
	}
	return out
}
