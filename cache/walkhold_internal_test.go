package cache

import (
	"sync/atomic"
	"testing"
)

// A recovery's hold on the walk outlasts the reflector's part of it while
// the store is still recovering. The delta loop has then not applied the
// recovery's end. The hold ends at once where the store is consistent.
func TestWalkRecoveryHoldsLastUntilConsistent(t *testing.T) {
	var d warmDelivery
	var h walkRecoveryHolds
	var recovering atomic.Bool
	free := func() bool { // the walk would go on past its next chunk
		d.yield.mu.Lock()
		defer d.yield.mu.Unlock()
		return d.yield.resume == nil
	}

	ended := h.take(&d, &recovering)
	if free() {
		t.Fatal("the walk is not held while a recovery lists")
	}
	recovering.Store(true) // the delta loop applied the recovery's diff
	ended()                // the reflector is done with it
	if free() {
		t.Fatal("the walk went on before the store applied the recovery's end")
	}
	h.consistent(&recovering)
	if !free() || recovering.Load() {
		t.Fatal("the walk is still held once the store is consistent")
	}

	// A recovery that fails before its diff leaves the store as it was.
	h.take(&d, &recovering)()
	if !free() {
		t.Fatal("the walk is still held after a recovery that never began")
	}
}
