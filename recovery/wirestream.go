package recovery

import (
	"io"

	"github.com/boltinformer/boltinformer/internal/wire"
)

// scanProtobufListStream reads a list in Kubernetes protobuf from r as it
// arrives (wire.ReadList), and calls item with each item's identity and raw
// bytes. The bytes are valid only until item returns. The reader reuses its
// buffer, so copy what is kept. It returns the list without items.
func scanProtobufListStream(r io.Reader, item func(wireItem) error) (*wireList, error) {
	return scanProtobufListStreamMeta(r, nil, item)
}

// scanProtobufListStreamMeta is scanProtobufListStream that also calls
// listMeta, if not nil, once the list's ListMeta is read. The serializer
// writes it before the items. So its continue token is known while the
// server is still writing the page.
func scanProtobufListStreamMeta(r io.Reader, listMeta func(*wireList), item func(wireItem) error) (*wireList, error) {
	var meta func(*wire.List)
	if listMeta != nil {
		meta = func(l *wire.List) { listMeta(newWireList(l)) }
	}
	l, err := wire.ReadList(r, meta, func(it wire.Item) error {
		return item(wireItem{namespace: it.Namespace, name: it.Name, uid: it.UID, resourceVersion: it.ResourceVersion, raw: it.Raw})
	})
	if err != nil {
		return nil, err
	}
	return newWireList(l), nil
}
