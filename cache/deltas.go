// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/controller.go
//   - tools/cache/the_real_fifo.go
// The ports are listed in hack/upstream-versions.txt.

package cache

import (
	"errors"
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// This file reproduces how client-go v0.37.2 applies popped deltas to the
// store and turns them into handler calls. It ports processDeltas,
// processDeltasInBatch, processReplacedAllInfo and the part of
// reconcileReplacement they use (tools/cache/controller.go,
// the_real_fifo.go). client-go keeps them unexported. A drop-in informer
// must call handlers exactly as they do, so the code follows theirs line for
// line. It differs in four ways.
//
//   - The store is our Indexer.
//   - A store error is returned instead of a panic. client-go's indexer
//     panics on index errors.
//   - A list the store applied without the objects it refused is told
//     without them.
//   - A relist's updates go to a relistHandler's onRelistUpdate where it
//     has one.

// processDeltas mirrors client-go's processDeltas.
func processDeltas(logger klog.Logger, handler cache.ResourceEventHandler, clientState cache.Store, deltas cache.Deltas, isInInitialList bool, keyFunc cache.KeyFunc) error {
	for _, d := range deltas {
		obj := d.Object
		switch d.Type {
		case cache.ReplacedAll:
			info, ok := obj.(cache.ReplacedAllInfo)
			if !ok {
				return fmt.Errorf("ReplacedAll did not contain ReplacedAllInfo: %T", obj)
			}
			if err := processReplacedAllInfo(logger, handler, info, clientState, isInInitialList, keyFunc); err != nil {
				return err
			}
		case cache.SyncAll:
			if _, ok := obj.(cache.SyncAllInfo); !ok {
				return fmt.Errorf("SyncAll did not contain SyncAllInfo: %T", obj)
			}
			for _, obj := range clientState.List() {
				handler.OnUpdate(obj, obj)
			}
			return nil
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if old, exists, err := clientState.Get(obj); err == nil && exists {
				if err := clientState.Update(obj); err != nil {
					return err
				}
				handler.OnUpdate(old, obj)
			} else {
				if err := clientState.Add(obj); err != nil {
					return err
				}
				handler.OnAdd(obj, isInInitialList)
			}
		case cache.Deleted:
			if err := clientState.Delete(obj); err != nil {
				return err
			}
			handler.OnDelete(obj)
		case cache.Bookmark:
			info, ok := obj.(cache.BookmarkInfo)
			if !ok {
				return fmt.Errorf("bookmark delta did not contain BookmarkInfo: %T", obj)
			}
			clientState.Bookmark(info.ResourceVersion)
		}
	}
	return nil
}

// processDeltasInBatch mirrors client-go's processDeltasInBatch. The batch
// is applied as one transaction. Then the handlers of the transactions that
// succeeded are called in order.
func processDeltasInBatch(logger klog.Logger, handler cache.ResourceEventHandler, clientState cache.Store, deltas []cache.Delta, isInInitialList bool, keyFunc cache.KeyFunc) error {
	txnStore, ok := clientState.(cache.TransactionStore)
	if !ok {
		var errs []error
		for _, delta := range deltas {
			if err := processDeltas(logger, handler, clientState, cache.Deltas{delta}, isInInitialList, keyFunc); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("unexpected error when handling deltas: %v", errs)
		}
		return nil
	}
	txns := make([]cache.Transaction, 0, len(deltas))
	callbacks := make([]func(), 0, len(deltas))
	for _, d := range deltas {
		obj := d.Object
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if old, exists, err := clientState.Get(obj); err == nil && exists {
				txns = append(txns, cache.Transaction{Type: cache.TransactionTypeUpdate, Object: obj})
				callbacks = append(callbacks, func() { handler.OnUpdate(old, obj) })
			} else {
				txns = append(txns, cache.Transaction{Type: cache.TransactionTypeAdd, Object: obj})
				callbacks = append(callbacks, func() { handler.OnAdd(obj, isInInitialList) })
			}
		case cache.Deleted:
			txns = append(txns, cache.Transaction{Type: cache.TransactionTypeDelete, Object: obj})
			callbacks = append(callbacks, func() { handler.OnDelete(obj) })
		default:
			//lint:ignore ST1005 client-go's message, verbatim
			return fmt.Errorf("Delta type %s is not supported in batch processing", d.Type)
		}
	}
	if err := txnStore.Transaction(txns...); err != nil {
		for _, i := range err.SuccessfulIndices {
			if i < len(callbacks) {
				callbacks[i]()
			}
		}
		return batchError{fmt.Sprintf("not all items in the batch successfully processed: %s", err.Error()), err.Errors}
	}
	for _, callback := range callbacks {
		callback()
	}
	return nil
}

// processReplacedAllInfo mirrors client-go's processReplacedAllInfo. Against
// a store that survived a restart, it is the reconciliation after a relist.
// Keys the store holds but the list lacks reach handlers as
// DeletedFinalStateUnknown with the stored object. Keys in both reach them
// as updates. The informer passes such an update only to resyncing handlers
// when the resourceVersion did not change.
func processReplacedAllInfo(logger klog.Logger, handler cache.ResourceEventHandler, info cache.ReplacedAllInfo, clientState cache.Store, isInInitialList bool, keyFunc cache.KeyFunc) error {
	var deletions []cache.DeletedFinalStateUnknown
	type replacement struct{ oldObj, newObj interface{} }
	replacements := make([]replacement, 0, len(info.Objects))
	err := reconcileReplacement(logger, clientState, info.Objects, keyFunc,
		func(obj cache.DeletedFinalStateUnknown) { deletions = append(deletions, obj) },
		func(obj interface{}) {
			if old, exists, err := clientState.Get(obj); err == nil && exists {
				replacements = append(replacements, replacement{newObj: obj, oldObj: old})
			} else {
				replacements = append(replacements, replacement{newObj: obj})
			}
		},
	)
	if err != nil {
		return err
	}
	// Replace the store first so it reflects what handlers are told. Our
	// Indexer applies a list without the objects it refuses, and handlers
	// are told of the rest only.
	err = clientState.Replace(info.Objects, info.ResourceVersion)
	var refused *refusedError
	if err != nil && !errors.As(err, &refused) {
		return err
	}
	for _, obj := range deletions {
		handler.OnDelete(obj)
	}
	relisted, _ := handler.(relistHandler)
	for _, r := range replacements {
		if refused != nil {
			if key, kerr := keyFunc(r.newObj); kerr == nil && refused.refusedKey(key) {
				continue
			}
		}
		if r.oldObj != nil && relisted != nil {
			relisted.onRelistUpdate(r.oldObj, r.newObj)
		} else if r.oldObj != nil {
			handler.OnUpdate(r.oldObj, r.newObj)
		} else {
			handler.OnAdd(r.newObj, isInInitialList)
		}
	}
	return err
}

// relistHandler is a handler that tells a relist's updates from the others.
// The informer is one (see Informer.onRelistUpdate).
type relistHandler interface {
	onRelistUpdate(old, new interface{})
}

// reconcileReplacement is client-go's reconcileReplacement for an empty
// queue, the only way processReplacedAllInfo calls it. Known keys missing
// from newItems become deletions. Then every new item becomes a replacement.
func reconcileReplacement(logger klog.Logger, known cache.KeyListerGetter, newItems []interface{}, keyOf cache.KeyFunc,
	onDelete func(cache.DeletedFinalStateUnknown), onReplace func(interface{})) error {
	newKeys := sets.Set[string]{}
	for _, obj := range newItems {
		key, err := keyOf(obj)
		if err != nil {
			return cache.KeyError{Obj: obj, Err: err}
		}
		newKeys.Insert(key)
	}
	for _, knownKey := range known.ListKeys() {
		if newKeys.Has(knownKey) {
			continue
		}
		deletedObj, exists, err := known.GetByKey(knownKey)
		if err != nil {
			deletedObj = nil
			utilruntime.HandleErrorWithLogger(logger, err, "Error during lookup, placing DeleteFinalStateUnknown marker without object", "key", knownKey)
		} else if !exists {
			deletedObj = nil
			utilruntime.HandleErrorWithLogger(logger, nil, "Key does not exist in known objects store, placing DeleteFinalStateUnknown marker without object", "key", knownKey)
		}
		onDelete(cache.DeletedFinalStateUnknown{Key: knownKey, Obj: deletedObj})
	}
	for _, obj := range newItems {
		onReplace(obj)
	}
	return nil
}

// batchError is client-go's batch processing error message. It keeps the
// transaction's errors for errors.Is. The informer uses them to tell an
// object it cannot store from other failures.
type batchError struct {
	msg  string
	errs []error
}

func (e batchError) Error() string   { return e.msg }
func (e batchError) Unwrap() []error { return e.errs }
