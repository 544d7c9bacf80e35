// Package podcounter is a small controller written only against client-go's
// informers.SharedInformerFactory. It counts the Pods of every namespace by
// phase and keeps a ConfigMap named pod-summary in each namespace that has
// Pods, holding those counts; it deletes the summary of a namespace left
// without Pods, and repairs a summary someone else edits.
//
// # Basics
//
// The controller works the same on client-go's factory and on
// boltinformer's (github.com/boltinformer/boltinformer/factory): only the
// constructor in cmd/podcounter differs. On boltinformer's, a restart
// resumes from the cache file instead of listing every Pod and ConfigMap.
//
// New registers the Pod and ConfigMap informers and their event handlers;
// start the factory after New and then call Run. Handlers only enqueue a
// namespace; a worker recounts it from the Pod lister and brings its summary
// to the counts, reading the current summary from the ConfigMap lister so
// that an up-to-date summary is never rewritten.
//
// # Caveats
//
// Counts is safe for concurrent use and reflects the namespaces the workers
// have processed so far. A Pod without a phase counts as Pending.
package podcounter
