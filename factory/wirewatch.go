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
// that message when no transform changed the object. Lists go through the
// clientset's REST client, each body read into a buffer that the list's next
// page reuses, and decoded in place too (wirelist.go).
//
// The watch client asks for protobuf, with JSON as the fallback. client-go's
// typed clients do the same for built-in types unless their config sets a
// content type. A clientset configured for JSON thus watches in protobuf
// here, and the objects are the same. Warnings on watch responses go to
// client-go's default warning handler. A clientset that is not a real one,
// such as a fake, lists and watches through its own calls. So does an
// informer whose ListerWatcher changes paging, resume, timeout or watch
// parameters, as a tweak may, for one of the capture's probes.

// wireClient is a group-version's payload-keeping REST client, with the
// decoders its responses are decoded with, and the clientset's REST client.
type wireClient struct {
	rest      *rest.RESTClient
	clientset rest.Interface // lists, with the clientset's warning handler
	decoders  runtime.ClientNegotiator
	// retryWait is listRetryWait, but in tests.
	retryWait time.Duration
}

// wireListerWatcher returns lw with its List and Watch made through the
// group's wireClient, with req's filters. It does so only if lw is
// client-go's own ListerWatcher for req (requestOnly), so that what it lists
// is the request, and if it sets no reflector parameters. The factory's
// clientset must also be a real one. Otherwise it returns lw. obj is the
// informer's object type. f.lock is held.
func (f *Factory) wireListerWatcher(lw cache.ListerWatcher, obj runtime.Object, gvr schema.GroupVersionResource, req listRequest) cache.ListerWatcher {
	if !req.requestOnly || req.setsReflectorParams {
		return lw
	}
	acc, err := accessorFor(obj)
	if err != nil {
		return lw
	}
	c := f.wireClientLocked(gvr.GroupVersion())
	if c == nil {
		return lw
	}
	namespace := req.namespace
	pages := &pageBuffer{}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			// As the typed client's List, with the filters its
			// ListerWatcher adds.
			return c.list(ctx, namespace, gvr.Resource, withFilters(opts, req.options), acc.list, pages)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			// As the typed client's Watch (gentype.Client.Watch), with the
			// filters its ListerWatcher adds.
			opts = withFilters(opts, req.options)
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			opts.Watch = true
			return c.rest.Get().NamespaceIfScoped(namespace, namespace != "").Resource(gvr.Resource).
				VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Watch(ctx)
		},
	}
}

// withFilters returns filters, which hold only filter fields, with the
// reflector's fields of opts (listidentity's reflector parameters). A
// ListerWatcher setting none of those sends exactly that.
func withFilters(opts, filters metav1.ListOptions) metav1.ListOptions {
	out := filters
	out.ResourceVersion, out.ResourceVersionMatch = opts.ResourceVersion, opts.ResourceVersionMatch
	out.Limit, out.Continue, out.TimeoutSeconds = opts.Limit, opts.Continue, opts.TimeoutSeconds
	out.Watch, out.AllowWatchBookmarks, out.SendInitialEvents = opts.Watch, opts.AllowWatchBookmarks, opts.SendInitialEvents
	return out
}

// wireClientLocked returns the group-version's payload-keeping REST client,
// built on first use, or nil if the clientset's is not a *rest.RESTClient.
// f.lock is held.
func (f *Factory) wireClientLocked(gv schema.GroupVersion) *wireClient {
	if c, ok := f.wireClients[gv]; ok {
		return c
	}
	c := newWireClient(f.restClientFor(gv))
	if f.wireClients == nil {
		f.wireClients = map[schema.GroupVersion]*wireClient{}
	}
	f.wireClients[gv] = c
	return c
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
func newWireClient(rc rest.Interface) *wireClient {
	r, ok := rc.(*rest.RESTClient)
	if !ok || r == nil {
		return nil
	}
	u := r.Get().URL() // the server's URL and the group-version's path
	gv := r.APIVersion()
	codecs := wire.NegotiatedSerializer{NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), Creater: scheme.Scheme}
	decoders := runtime.NewClientNegotiator(codecs, gv)
	out, err := rest.NewRESTClient(&url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}, u.Path, rest.ClientContentConfig{
		AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		ContentType:        runtime.ContentTypeProtobuf,
		GroupVersion:       gv,
		Negotiator:         decoders,
	}, r.GetRateLimiter(), r.Client)
	if err != nil {
		return nil
	}
	return &wireClient{rest: out, clientset: rc, decoders: decoders, retryWait: listRetryWait}
}
