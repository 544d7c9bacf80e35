package recovery

import (
	"context"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Lister is what a recovery asks the server beyond the ListerWatcher. It is
// a struct of functions, as client-go's cache.ListWatch is. Its lists are
// exactly the ListerWatcher's, of the same resource, namespace and
// selectors. So the diff and the fetches see the collection the store
// holds. A Lister vouches that the collection's resourceVersions are etcd
// revisions, which a recovery compares as integers. Options.OpaqueVersions
// withdraws that. ListMetadata and ListObjects are required. Each other
// field's comment names what its zero value does.
// New copies the Lister, so a change made to it later changes no recovery.
type Lister struct {
	// ListMetadata lists one page of the collection's metadata, with opts'
	// ResourceVersion, ResourceVersionMatch, Limit and Continue. Required.
	ListMetadata func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	// ListObjects lists the collection's objects with opts'
	// ResourceVersion, ResourceVersionMatch, Limit and Continue. A namespace
	// that is not empty restricts the list to it. A name that is not empty
	// restricts it to that object, as a metadata.name field selector beside
	// the lister's own selectors. Required.
	ListObjects func(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error)
	// ListMetadataWire is ListMetadata, undecoded, its request made with
	// the Accept header MetadataListAccept. It returns the response body,
	// which the caller reads and closes. A recovery then reads each item's
	// identity from a Kubernetes protobuf body as it arrives. A JSON body is
	// decoded. It asks for larger pages (recoveryStreamPageSize), as it
	// holds one item at a time. Nil means pages of 500 items, each decoded
	// by ListMetadata.
	ListMetadataWire func(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error)
	// ListObjectsWire is ListObjects of namespace without a name,
	// undecoded. An empty namespace is all the lister lists. It returns the
	// response body as it arrives, which the caller reads and closes. It
	// also returns a function that decodes a whole body as ListObjects would.
	//
	// A recovery lists the whole collection through it where it cannot list
	// metadata, or cannot compare the listed resourceVersions. An aggregated
	// API's server may not serve the metadata form. Versions that are not
	// integers cannot be compared. It reads each item's UID and
	// resourceVersion from the bytes of a Kubernetes protobuf response. It
	// decodes only the items that changed. Its fetch of the whole
	// collection likewise decodes only the objects it is for. A body in
	// another format (JSON) is decoded whole.
	//
	// Nil means those lists are decoded whole (ListObjects). A recovery
	// whose metadata list cannot be made or compared is then a full list
	// through Store.Replace, as client-go's, unless Options.ListInFull is
	// set.
	ListObjectsWire func(ctx context.Context, namespace string, opts metav1.ListOptions) (body io.ReadCloser, decode func([]byte) (runtime.Object, error), err error)
	// QPS is the sustained rate of the client rate limiter that the
	// requests go through (client-go's default is 5 a second). A recovery
	// plans its fetches to fit it (see fetchBudgetTime). Zero or less means
	// no limit, and no request budget.
	QPS float32
}

// MetadataListAccept is the Accept header of Lister.ListMetadataWire's
// request. It asks for the list's metadata only, in protobuf or JSON, as
// client-go's metadata client does. Unlike client-go's, it does not also
// accept plain JSON, which would bring the objects. A server that cannot
// serve the metadata form answers 406 Not Acceptable. The recovery then
// lists in full instead.
const MetadataListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// listObjectsWire is Lister.ListObjectsWire's type.
type listObjectsWire = func(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error)
