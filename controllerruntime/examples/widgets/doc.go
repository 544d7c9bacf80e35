// Package widgets is an example operator written against controller-runtime
// alone, whose manager gets a persistent cache by one option
// (PersistentCache).
//
// A Widget (widgets.example.boltinformer.io/v1, a custom resource) owns one
// ConfigMap, <name>-config, holding the Widget's message and whether the
// Service it names exists. The reconciler finds the ConfigMaps a Widget owns
// through a field index (IndexField on the controller owner) and watches
// Services metadata-only (builder.OnlyMetadata), mapping a Service to the
// Widgets that name it through a second field index. The cluster runs no
// garbage collector in the tests, so the reconciler deletes the ConfigMaps
// of a deleted Widget itself, including one deleted while the operator was
// down.
package widgets
